package perf

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	res := func(k Kind, run int, m map[string]float64, lat ...time.Duration) Result {
		return Result{Scenario: "large_4mb", Kind: k, Run: run, Metrics: m, Latencies: lat}
	}
	return &Report{Runs: 2, Results: []Result{
		res(Wingman, 0, map[string]float64{"p50_ms": 12, "p99_ms": 20, "cpu_ms_per_mb": 1, "mallocs_per_mb": 100}, 12*time.Millisecond, 20*time.Millisecond),
		res(Reference, 0, map[string]float64{"p50_ms": 30, "p99_ms": 40, "cpu_ms_per_mb": 4, "mallocs_per_mb": 400}, 30*time.Millisecond),
		res(Direct, 0, map[string]float64{"p50_ms": 10, "p99_ms": 15}, 10*time.Millisecond),
		res(Reference, 1, map[string]float64{"p50_ms": 20, "p99_ms": 40, "cpu_ms_per_mb": 2, "mallocs_per_mb": 400}, 20*time.Millisecond),
		res(Wingman, 1, map[string]float64{"p50_ms": 11, "p99_ms": 20, "cpu_ms_per_mb": 1, "mallocs_per_mb": 100}, 11*time.Millisecond),
		res(Direct, 1, map[string]float64{"p50_ms": 10, "p99_ms": 15}, 10*time.Millisecond),
		res(Floor, 0, map[string]float64{"p50_ms": 11, "p99_ms": 16, "cpu_ms_per_mb": 0.8}, 11*time.Millisecond),
		res(Floor, 1, map[string]float64{"p50_ms": 10.5, "p99_ms": 16, "cpu_ms_per_mb": 0.5}, 10*time.Millisecond),
	}}
}

func TestSummarizeRatiosAndAddedLatency(t *testing.T) {
	s := Summarize(sampleReport())
	// Per-run ratios 1/4 and 1/2: the median is their mean.
	if f := s.Figures["large_4mb.cpu_ms_per_mb"]; f.Ratio != 0.375 || f.Wingman != 1 || f.Reference != 3 {
		t.Errorf("cpu figure %+v, want ratio 0.375, wingman 1, reference 3", f)
	}
	// Added latency: run 0 (12-10)/(30-10) = 0.1, run 1 (11-10)/(20-10) = 0.1.
	if f := s.Figures["large_4mb.added_p50_ms"]; f.Ratio < 0.0999 || f.Ratio > 0.1001 {
		t.Errorf("added p50 ratio %v, want 0.1", f.Ratio)
	}
	if f := s.Figures["large_4mb.p50_ms"]; f.Direct != 10 {
		t.Errorf("direct p50 %v, want 10", f.Direct)
	}
	// Against the floor: per-run ratios 1/0.8 and 1/0.5, median 1.625; the floor's median 0.65.
	if f := s.Figures["large_4mb.cpu_ms_per_mb"]; f.FloorRatio != 1.625 || f.FloorRatioMin != 1.25 || f.FloorRatioMax != 2 || f.Floor != 0.65 {
		t.Errorf("cpu figure against the floor %+v, want ratio 1.625 (1.25-2), floor 0.65", f)
	}
	var cpu, floor Target
	for _, tg := range s.Targets {
		switch {
		case strings.Contains(tg.Name, "CPU") && strings.Contains(tg.Name, "floor"):
			floor = tg
		case strings.Contains(tg.Name, "CPU"):
			cpu = tg
		}
	}
	if !cpu.Measured || cpu.Pass || cpu.Want != "≤ 0.25× the reference" {
		t.Errorf("CPU target %+v, want measured and missed (0.375 > 0.25, issue 30's target)", cpu)
	}
	if !floor.Measured || floor.Pass || floor.Want != "≤ 1.30× the floor" {
		t.Errorf("CPU against the floor %+v, want measured and missed (1.625 > 1.3, issue 30's target)", floor)
	}
}

func TestGateFailsOnRegression(t *testing.T) {
	s := Summarize(sampleReport())
	base := &Baseline{Tolerance: 0.25, Ratios: map[string]float64{"large_4mb.cpu_ms_per_mb": 0.375},
		Budgets: map[string]float64{"large_4mb.mallocs_per_mb": 100}}
	if fails := base.Check(s); len(fails) != 0 {
		t.Fatalf("unchanged figures fail the gate: %v", fails)
	}
	base.Ratios["large_4mb.cpu_ms_per_mb"] = 0.25 // measured 0.375 > 0.25 × 1.25
	base.Budgets["large_4mb.mallocs_per_mb"] = 70 // measured 100 > 70 × 1.25
	fails := base.Check(s)
	if len(fails) != 2 || !strings.Contains(fails[0], "cpu_ms_per_mb") || !strings.Contains(fails[1], "mallocs_per_mb") {
		t.Errorf("regressions gave %q, want one failure each for the ratio and the budget", fails)
	}
	// The binary's CPU per MB against the same run's process floor: 1.625 measured.
	base = &Baseline{Tolerance: 0.25, FloorRatios: map[string]float64{"large_4mb.cpu_ms_per_mb": 1.3}}
	if fails := base.Check(s); len(fails) != 0 {
		t.Errorf("1.625 against a floor baseline of 1.3 (limit 1.625) gave %q, want a pass", fails)
	}
	base.FloorRatios["large_4mb.cpu_ms_per_mb"] = 1.25 // limit 1.5625 < 1.625
	if fails := base.Check(s); len(fails) != 1 || !strings.Contains(fails[0], "process floor") {
		t.Errorf("a 30%% regression against the floor gave %q, want one failure", fails)
	}
	base.FloorRatios = map[string]float64{"large_4mb.p99_ms": 1}
	if fails := base.Check(s); len(fails) != 0 {
		t.Errorf("p99 ratio to the floor gave %q", fails)
	}
	base.FloorRatios = map[string]float64{"large_4mb.mallocs_per_mb": 1}
	if fails := base.Check(s); len(fails) != 1 || !strings.Contains(fails[0], "no ratio to the floor") {
		t.Errorf("a floor ratio the floor did not measure gave %q, want a failure", fails)
	}
	base = &Baseline{Tolerance: 0.25, Ratios: map[string]float64{"large_4mb.idle_anon_kb": 1}}
	if fails := base.Check(s); len(fails) != 1 || !strings.Contains(fails[0], "no ratio") {
		t.Errorf("a gated figure missing from a scenario that ran gave %q, want a failure", fails)
	}
	base = &Baseline{Ratios: map[string]float64{"dense.idle_pss_total_kb": 1}}
	if fails := base.Check(s); len(fails) != 0 {
		t.Errorf("a scenario that did not run gave %q, want it skipped", fails)
	}
}

func TestLoadBaselineRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown field":     `{"tolerance": 0.1, "ratio": {}}`,
		"negative ratio":    `{"ratios": {"a.b": -1}}`,
		"budget not allocs": `{"budgets": {"large_4mb.p50_ms": 3}}`,
		"bad tolerance":     `{"tolerance": -1}`,
		"memory not in KiB": `{"memory": {"startup.idle_anon": 3}}`,
		"VmRSS memory gate": `{"memory": {"startup.idle_vmrss_kb": 3}}`,
		"VmRSS ratio gate":  `{"ratios": {"dense.idle_vmrss_total_kb": 1}}`,
		"VmHWM memory gate": `{"memory": {"dense.push_vmhwm_total_kb": 3}}`,
		"bad memory tol.":   `{"memory_tolerance": -1}`,
		"not json":          `tolerance: 1`,
	} {
		path := filepath.Join(dir, "b.json")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadBaseline(path); err == nil {
			t.Errorf("%s: baseline %s accepted", name, body)
		}
	}
	if _, err := LoadBaseline("baseline.json"); err != nil {
		t.Errorf("the committed baseline: %v", err)
	}
}

func TestReportRendersValidSVGAndTable(t *testing.T) {
	rep := sampleReport()
	svg := LatencySVG(rep)
	dec := xml.NewDecoder(strings.NewReader(svg))
	lines := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 4 {
		t.Errorf("SVG has %d latency curves, want 4 (wingman, reference, direct, floor)", lines)
	}
	dir := t.TempDir()
	path, err := WriteReport(dir, rep, Summarize(rep), "perf -runs 2")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| large_4mb | cpu_ms_per_mb | 1.000 | 3.000 |  | 0.650 | 0.375 | 0.25-0.50 | 1.625 | 1.25-2.00 |", "latency.svg", "`perf -runs 2`", "not measured"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
