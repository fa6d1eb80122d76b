package perf

import (
	"os"
	"strings"
	"testing"
	"time"
)

// gateScenarios are the scenarios whose figures baseline.json gates.
var gateScenarios = []string{"startup", "large_4mb", "many_1500", "downstreams_10"}

// TestPerfGate is the CI version of `make perf-gate`: it builds the real pilot-agent as `make
// build` does (with the Envoy stand-in and the reference agent child), runs the gated scenarios
// (short, three interleaved runs of Wingman and the reference), and fails when a ratio, an
// allocation budget or a memory figure (idle anonymous memory and PSS, binary size) regresses past baseline.json's
// tolerances. It compares only ratios, allocation counts and sizes, never times.
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
	bins, err := Build(t.Context(), work, true)
	if err != nil {
		t.Fatal(err)
	}
	// A ratio of CPU times on a shared 2-core machine has a tail: one measurement in six of an
	// unchanged build was seen past a 25 % tolerance (2026-12-06: the floor ratio at 1.70 against
	// 1.69, the reference ratio at 0.79 against 0.75). A regression shows in every measurement, so
	// a figure fails only when a second measurement, taken at once, regresses past the baseline too.
	first := measureGate(t, base, bins, work)
	if len(first) == 0 {
		return
	}
	t.Logf("first measurement regressed, measuring again:\n%s", strings.Join(first, "\n"))
	if again := measureGate(t, base, bins, work); len(again) > 0 {
		t.Errorf("performance regressed against baseline.json in two measurements in a row:\n%s", strings.Join(again, "\n"))
	}
}

// measureGate runs the gated scenarios once, logs every gated figure, and returns what regressed
// past baseline.json's tolerances.
func measureGate(t *testing.T, base *Baseline, bins Bins, work string) []string {
	t.Helper()
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
	for _, k := range sortedKeys(base.FloorRatios) {
		f := sum.Figures[k]
		t.Logf("%-36s wingman %10.4g  floor %10.4g  ratio %.3f (runs %.2f-%.2f; baseline %.3f)", k, f.Wingman, f.Floor, f.FloorRatio,
			f.FloorRatioMin, f.FloorRatioMax, base.FloorRatios[k])
	}
	for _, k := range sortedKeys(base.Budgets) {
		t.Logf("%-36s wingman %10.4g  (budget %.4g)", k, sum.Figures[k].Wingman, base.Budgets[k])
	}
	for _, k := range sortedKeys(base.Memory) {
		t.Logf("%-36s wingman %10.0f KiB  (baseline %.0f KiB)", k, sum.Figures[k].Wingman, base.Memory[k])
	}
	for _, k := range []string{"startup.exec_ms", "startup.added_exec_ms"} {
		f := sum.Figures[k]
		t.Logf("%-36s wingman %10.2f ms  reference %.2f ms  direct %.2f ms (reported, not gated: wall time)", k, f.Wingman, f.Reference, f.Direct)
	}
	return base.Check(sum)
}
