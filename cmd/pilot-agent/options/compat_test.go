package options

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite docs/compat.md from the Compat table")

// repoRoot is the directory holding go.mod, found upwards from the package directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}

// TestCompatDoc keeps docs/compat.md generated from Compat (-update rewrites it).
func TestCompatDoc(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCompat(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(repoRoot(t), "docs", "compat.md")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run: go test ./cmd/pilot-agent/options -run TestCompatDoc -update)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Errorf("docs/compat.md differs from the Compat table; run: go test ./cmd/pilot-agent/options -run TestCompatDoc -update")
	}
}

// TestCompatComplete: one row for every variable Documented lists and every ProxyConfig field
// (walked from istio.io/api's descriptor, so a field added there fails here), and no row for
// anything else.
func TestCompatComplete(t *testing.T) {
	want := map[string]Kind{}
	for _, g := range Documented {
		for _, v := range g.Vars {
			want[v.Name] = KindEnv
		}
	}
	fields := (&meshv1alpha1.ProxyConfig{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		want[fields.Get(i).JSONName()] = KindProxyConfig
	}
	seen := map[string]bool{}
	statuses := map[Status]bool{Same: true, SameUntested: true, Different: true, Refused: true,
		IgnoredByIstio: true, Pending: true, WingmanOnly: true}
	for _, r := range Compat {
		if seen[r.Name] {
			t.Errorf("%s has two rows", r.Name)
		}
		seen[r.Name] = true
		if k, ok := want[r.Name]; !ok || k != r.Kind {
			t.Errorf("row %s (%s) names no documented variable or ProxyConfig field of that kind", r.Name, r.Kind)
		}
		if !statuses[r.Status] {
			t.Errorf("%s: unknown status %q", r.Name, r.Status)
		}
		if r.Status != Same && r.Status != IgnoredByIstio && r.Status != SameUntested && r.Note == "" {
			t.Errorf("%s (%s) needs a note saying how or why", r.Name, r.Status)
		}
		for i, part := range strings.Split(r.Note, "`") {
			if i%2 == 0 && strings.ContainsAny(part, "<>*|") {
				t.Errorf("%s: note has <, >, * or | outside `code` (markdown would eat it): %q", r.Name, part)
			}
		}
		if (r.Status == WingmanOnly) != strings.HasPrefix(r.Name, "WINGMAN_") {
			t.Errorf("%s: only WINGMAN_* variables are Wingman's own", r.Name)
		}
	}
	for name, kind := range want {
		if !seen[name] {
			t.Errorf("%s %s has no row in Compat", kind, name)
		}
	}
}

// TestCompatTestsExist: every "same" (and "refused") row names at least one test, and every
// test named is a func in the repository's *_test.go files.
func TestCompatTestsExist(t *testing.T) {
	root := repoRoot(t)
	funcs := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "out" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			funcs[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(Compat[:len(Compat):len(Compat)], CompatFlags...) {
		if (r.Status == Same || r.Status == Refused) && len(r.Tests) == 0 {
			t.Errorf("%s is %q but names no test", r.Name, r.Status)
		}
		for _, name := range r.Tests {
			if !funcs[name] {
				t.Errorf("%s names test %s, which no *_test.go declares", r.Name, name)
			}
		}
	}
}

// TestSupportMatrixInReadme keeps README.md's support matrix the same as docs/compat.md's.
func TestSupportMatrixInReadme(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(SupportMatrix, "## Supported Istio releases", "### Supported Istio releases", 1)
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not hold options.SupportMatrix (with a ### heading); copy it from docs/compat.md")
	}
}
