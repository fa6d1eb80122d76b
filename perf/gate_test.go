package perf

import (
	"os"
	"strings"
	"testing"
	"time"
)

// gateScenarios are the scenarios whose figures baseline.json gates.
var gateScenarios = []string{"large_4mb", "many_1500", "downstreams_10"}

// TestPerfGate is the CI version of `make perf-gate`: it builds the Envoy stand-in and the agent
// child, runs the gated scenarios (short, three interleaved runs of Wingman's mux and the
// reference), and fails when a ratio or allocation budget regresses past baseline.json's
// tolerance. It compares only ratios and allocation counts, never times.
func TestPerfGate(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end perf gate: runs in plain `go test` and `make perf-gate`")
	}
	if raceEnabled {
		t.Skip("ratios are measured without the race detector (make gate)")
	}
	base, err := LoadBaseline("baseline.json")
	if err != nil {
		t.Fatal(err)
	}
	work, err := os.MkdirTemp("", "pg") // short: Unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	bins, err := Build(t.Context(), work, false)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), Config{Bins: bins, WorkDir: work, Scenarios: gateScenarios, Runs: 3, Short: true,
		ScenarioTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sum := Summarize(rep)
	for _, k := range sortedKeys(base.Ratios) {
		f := sum.Figures[k]
		t.Logf("%-36s wingman %10.4g  reference %10.4g  ratio %.3f (baseline %.3f)", k, f.Wingman, f.Reference, f.Ratio, base.Ratios[k])
	}
	if fails := base.Check(sum); len(fails) > 0 {
		t.Errorf("performance regressed against baseline.json:\n%s", strings.Join(fails, "\n"))
	}
}
