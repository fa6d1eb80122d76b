package perf

import (
	"strings"
	"testing"
)

// The memory gate holds the real binary's idle anonymous memory, its PSS and its size: a 25%
// growth of any fails, noise within the tolerance passes, a gated figure missing from a
// scenario that ran fails, and VmRSS (reported only) moves nothing.
func TestMemoryGate(t *testing.T) {
	rep := &Report{BinarySize: 10 << 20, Results: []Result{
		{Scenario: "startup", Kind: Wingman, Metrics: map[string]float64{"idle_vmrss_kb": 15000, "idle_anon_kb": 4000, "idle_pss_kb": 5000, "exec_cpu_ms": 14, "exec_ms": 20}},
		{Scenario: "startup", Kind: Reference, Metrics: map[string]float64{"idle_vmrss_kb": 15000, "idle_anon_kb": 3000, "idle_pss_kb": 4000, "exec_cpu_ms": 7, "exec_ms": 15}},
		{Scenario: "startup", Kind: Direct, Metrics: map[string]float64{"exec_ms": 5}},
	}}
	s := Summarize(rep)
	if f := s.Figures["binary.size_kb"]; f.Wingman != 10<<10 {
		t.Errorf("binary.size_kb = %+v, want 10240 KiB", f)
	}
	if f := s.Figures["startup.added_exec_ms"]; f.Wingman != 15 || f.Reference != 10 || f.Ratio != 1.5 {
		t.Errorf("startup.added_exec_ms = %+v, want 15 / 10 ms, ratio 1.5 (exec minus the direct stand-in's own start)", f)
	}
	base := &Baseline{Tolerance: 0.25, MemoryTolerance: 0.2,
		Ratios: map[string]float64{"startup.exec_cpu_ms": 2},
		Memory: map[string]float64{"startup.idle_anon_kb": 4000, "startup.idle_pss_kb": 4500, "binary.size_kb": 10 << 10}}
	if fails := base.Check(s); len(fails) != 0 {
		t.Fatalf("figures within the tolerances fail the gate: %v", fails)
	}
	base.Memory["startup.idle_pss_kb"] = 4000 // 5000 is +25%
	if fails := base.Check(s); len(fails) != 1 || !strings.Contains(fails[0], "idle_pss_kb") {
		t.Errorf("25%% more PSS gave %q, want one failure", fails)
	}
	base.Memory["startup.idle_pss_kb"] = 4500
	base.Memory["startup.idle_anon_kb"] = 3200     // 4000 is +25%
	base.Memory["binary.size_kb"] = 8 << 10        // 10 MiB is +25%
	base.Ratios["startup.exec_cpu_ms"] = 2.0 / 1.4 // 2 is +40%
	fails := base.Check(s)
	if len(fails) != 3 || !strings.Contains(fails[0], "exec_cpu_ms") || !strings.Contains(fails[1], "binary.size_kb") ||
		!strings.Contains(fails[2], "idle_anon_kb") {
		t.Errorf("25%% more memory and a 40%% worse CPU ratio gave %q, want three failures", fails)
	}
	base = &Baseline{Memory: map[string]float64{"startup.early_anon_kb": 1}}
	if fails := base.Check(s); len(fails) != 1 || !strings.Contains(fails[0], "not measured") {
		t.Errorf("a memory figure missing from a scenario that ran gave %q, want a failure", fails)
	}
}

func TestParseMemStats(t *testing.T) {
	text := "heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [3: 4] @ 0x1\n\n# runtime.MemStats\n# Alloc = 5\n" +
		"# TotalAlloc = 3141752\n# Sys = 13138184\n# Mallocs = 42817\n# Frees = 1\n"
	m, b, ok := parseMemStats(strings.NewReader(text))
	if !ok || m != 42817 || b != 3141752 {
		t.Errorf("parseMemStats = %d, %d, %v; want 42817, 3141752, true", m, b, ok)
	}
	if _, _, ok := parseMemStats(strings.NewReader("# Mallocs = 1\n")); ok {
		t.Error("a text without TotalAlloc parsed")
	}
}
