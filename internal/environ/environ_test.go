package environ

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestFirstEntryWins(t *testing.T) {
	env := []string{"A=1", "B=", "junk", "A=2", "AB=3", "B=4"}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{{"A", "1", true}, {"B", "", true}, {"AB", "3", true}, {"C", "", false}, {"junk", "", false}} {
		if v, ok := Lookup(env, tc.name); v != tc.want || ok != tc.ok {
			t.Errorf("Lookup %s = %q %t, want %q %t", tc.name, v, ok, tc.want, tc.ok)
		}
	}
	if got, want := Unique(env), []string{"A=1", "B=", "AB=3"}; !slices.Equal(got, want) {
		t.Errorf("Unique = %q, want %q", got, want)
	}
	if m := Map(env); m["A"] != "1" || m["B"] != "" || len(m) != 3 {
		t.Errorf("Map = %v", m)
	}
	clean := []string{"A=1", "B=2"}
	if got := Unique(clean); &got[0] != &clean[0] {
		t.Error("Unique copied an environment without repeats")
	}
}

// TestGoResolvesRepeatsTheSameWay runs this test binary with a repeated variable and checks that
// os.Getenv and os.Environ in the child resolve it as Lookup and Unique do: the rule is Go's, not
// ours. (It fails with a last-wins Lookup: the child checks for "first".)
func TestGoResolvesRepeatsTheSameWay(t *testing.T) {
	if os.Getenv("ENVIRON_CHILD") == "1" {
		if os.Getenv("ENVIRON_REPEATED") != "first" {
			os.Exit(3)
		}
		n := 0
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "ENVIRON_REPEATED=") {
				n++
			}
		}
		if n != 1 {
			os.Exit(4)
		}
		return
	}
	env := []string{"ENVIRON_CHILD=1", "ENVIRON_REPEATED=first", "ENVIRON_REPEATED=second"}
	if v, _ := Lookup(env, "ENVIRON_REPEATED"); v != "first" {
		t.Fatalf("Lookup: %q", v)
	}
	// os.StartProcess hands the list to execve as it is (os/exec would resolve the repeat itself,
	// the last entry winning, before the child could).
	p, err := os.StartProcess(os.Args[0], []string{os.Args[0], "-test.run=^TestGoResolvesRepeatsTheSameWay$"},
		&os.ProcAttr{Env: env, Files: []*os.File{nil, os.Stderr, os.Stderr}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil || !st.Success() {
		t.Fatalf("child with a repeated variable: %v %v (3: os.Getenv, 4: os.Environ disagree)", st, err)
	}
}
