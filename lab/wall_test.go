package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/wingman-mesh/wingman"

// listed is the part of `go list -json`'s package record the wall check reads.
type listed struct {
	ImportPath     string
	Dir            string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string // excluded by build constraints: parsed too, so no tag hides an import
	Deps           []string // transitive imports of the non-test files
	Error          *struct{ Err string }
}

// inside reports whether path is under one of the module's top folders in tops.
func inside(path string, tops ...string) bool {
	for _, t := range tops {
		p := module + "/" + t
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// breaches lists how a package reaches the lab from its non-test files: each file that imports
// a lab package, then each lab package among its transitive dependencies (through perf/ or
// bench/, say).
func breaches(p listed) ([]string, error) {
	var out []string
	for _, f := range append(append(append([]string(nil), p.GoFiles...), p.CgoFiles...), p.IgnoredGoFiles...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, imp := range af.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return nil, err
			}
			if inside(path, "lab") {
				out = append(out, filepath.Join(p.Dir, f)+" imports "+path)
			}
		}
	}
	for _, d := range p.Deps {
		if inside(d, "lab") {
			out = append(out, p.ImportPath+" depends on "+d)
		}
	}
	return out, nil
}

// TestWall: no non-test Go file outside lab/, perf/ and bench/ imports a lab package, directly
// or through another package (cmd/pilot-agent's TestLinkDenyList checks the shipped binary's
// link set the same way).
func TestWall(t *testing.T) {
	if testing.Short() {
		t.Skip("lists every package of the module")
	}
	out, err := exec.Command("go", "list", "-e", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var checked, labSeen int
	var perf *listed
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		switch {
		case inside(p.ImportPath, "lab"):
			labSeen++
			continue
		case p.ImportPath == module+"/perf":
			perf = &p
		}
		if inside(p.ImportPath, "perf", "bench") {
			continue
		}
		checked++
		found, err := breaches(p)
		if err != nil {
			t.Fatalf("%s: %v", p.ImportPath, err)
		}
		for _, b := range found {
			t.Errorf("outside the wall: %s", b)
		}
	}
	// The check must be able to fail: the listing holds the product and the lab, and perf,
	// which runs the lab's control plane, is caught when looked at as if it were outside.
	if checked < 10 || labSeen < 5 || perf == nil {
		t.Fatalf("go list found %d packages outside the wall, %d in the lab, perf: %v: not the module's packages", checked, labSeen, perf != nil)
	}
	if found, err := breaches(*perf); err != nil || len(found) == 0 {
		t.Fatalf("the check does not see perf's imports of the lab (err %v): it would pass vacuously", err)
	}
}
