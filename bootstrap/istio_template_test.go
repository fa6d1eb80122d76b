package bootstrap

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/wingman-mesh/wingman/bootstrap/envoyproto"
)

// The tests in this file render Istio's own bootstrap template of each supported release, read
// at test time from Istio's git repository (ISTIO_GIT_DIR, default /work/.mirror/istio+istio/repo)
// and never copied into this repository. They are skipped where that repository is not at hand.

// istioTemplate writes the image template tools/packaging/common/envoy_bootstrap.json of tag to
// a temporary file and returns its path, or skips the test.
func istioTemplate(t testing.TB, tag string) string {
	t.Helper()
	dir := os.Getenv("ISTIO_GIT_DIR")
	if dir == "" {
		dir = "/work/.mirror/istio+istio/repo"
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("Istio's git repository is not at %s (set ISTIO_GIT_DIR)", dir)
	}
	rev := tag
	if strings.HasPrefix(tag, "master") {
		rev = "86c9f01fd735fb01d8192f5bcaf0d424afb7f14c"
	}
	out, err := exec.Command("git", "--git-dir="+dir, "show", rev+":tools/packaging/common/envoy_bootstrap.json").Output()
	if err != nil {
		t.Skipf("git show %s: %v", rev, err)
	}
	p := filepath.Join(t.TempDir(), "envoy_bootstrap_tmpl.json")
	must(t, os.WriteFile(p, out, 0o600))
	return p
}

// releaseVersion is a version string stamping r.
func releaseVersion(r Release) string {
	return r.String() + ".0"
}

// newWarnRecorder returns a logger that keeps the warnings a render logs, in slog's text form.
func newWarnRecorder() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), &buf
}

// TestIstioTemplateEachRelease renders each release's own template, stamped with that release,
// over every input set of TestTemplateParity: no parameter may be unknown (no warning), and the
// output must be a bootstrap Envoy's protos accept.
func TestIstioTemplateEachRelease(t *testing.T) {
	for _, rel := range Releases {
		t.Run(rel.String(), func(t *testing.T) {
			path := istioTemplate(t, rel.Tag())
			for name, cfg := range parityCases(t) {
				cfg.IstioVersion = releaseVersion(rel)
				log, buf := newWarnRecorder()
				cfg.Logger = log
				out, err := RenderTemplate(t.Context(), cfg, path)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if strings.Contains(buf.String(), "parameter") {
					t.Errorf("%s: warnings: %s", name, buf)
				}
				for _, f := range envoyproto.Validate(out) {
					t.Errorf("%s: Envoy validation: %s", name, f)
				}
			}
		})
	}
}

// TestBuiltInEqualsNewestTemplate: the typed render (no template file) equals the newest
// supported release's own template rendered by Wingman for the same inputs, key by key.
func TestBuiltInEqualsNewestTemplate(t *testing.T) {
	path := istioTemplate(t, NewestRelease.Tag())
	for name, cfg := range parityCases(t) {
		t.Run(name, func(t *testing.T) {
			cfg.IstioVersion = releaseVersion(NewestRelease)
			typed, err := Render(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := RenderTemplate(t.Context(), cfg, path)
			if err != nil {
				t.Fatal(err)
			}
			sameBootstrap(t, typed, tmpl)
		})
	}
}

func sameBootstrap(t *testing.T, typed, tmpl []byte) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(typed, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(tmpl, &b); err != nil {
		t.Fatalf("template output is not JSON: %v", err)
	}
	for _, d := range jsonDiff("", a, b) {
		t.Errorf("%s", d)
	}
}

// jsonDiff lists the paths where two decoded JSON documents differ.
func jsonDiff(path string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		var out []string
		for _, k := range sortedKeys(av, bv) {
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inA:
				out = append(out, path+"."+k+": only in the template render")
			case !inB:
				out = append(out, path+"."+k+": only in the built-in render")
			default:
				out = append(out, jsonDiff(path+"."+k, x, y)...)
			}
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		var out []string
		for i := range av {
			out = append(out, jsonDiff(path+"["+strconv.Itoa(i)+"]", av[i], bv[i])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return []string{path + ": built-in " + string(ja) + " template " + string(jb)}
}

// FuzzDropTrailingCommas: strict JSON passes unchanged (it has no trailing comma outside a
// string), the pass never grows its input, and what it makes valid stays as it is. Only the one
// comma before a closer goes: ",, }" is left invalid, as Envoy's parser finds it too.
// TestTemplateOutputSyntax holds what it removes.
func FuzzDropTrailingCommas(f *testing.F) {
	f.Add([]byte(`{"a": [1, 2, ], "s": ", }", "o": {"k": true, }, }`))
	f.Add([]byte(`{"a": "\", ]", "b": [ ]}`))
	f.Add([]byte(`[,]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := dropTrailingCommas(in)
		if json.Valid(in) && !bytes.Equal(out, in) {
			t.Fatalf("valid JSON changed:\n%q\n%q", in, out)
		}
		if len(out) > len(in) {
			t.Fatalf("grew: %q -> %q", in, out)
		}
		if again := dropTrailingCommas(out); json.Valid(out) && !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
	})
}

// BenchmarkIstioTemplate renders master's own template (the image's template at start).
func BenchmarkIstioTemplate(b *testing.B) {
	path := istioTemplate(b, NewestRelease.Tag())
	cfg := baseConfig(b)
	cfg.IstioVersion = releaseVersion(NewestRelease)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderTemplate(b.Context(), cfg, path); err != nil {
			b.Fatal(err)
		}
	}
}
