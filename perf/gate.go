package perf

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Baseline is perf/baseline.json: the ratios and allocation figures of an accepted run. Gates
// compare only ratios (Wingman / reference, same run) and allocation counts, never times.
type Baseline struct {
	// Tolerance is the relative regression allowed (0.25: a ratio may grow by 25%).
	Tolerance float64 `json:"tolerance"`
	// Ratios are "scenario.metric" → the accepted Wingman/reference ratio (lower is better).
	Ratios map[string]float64 `json:"ratios"`
	// FloorRatios are "scenario.metric" → the accepted ratio of Wingman to the floor forwarder
	// (lab/floorfwd) of the same run, the process that only carries the bytes (issue 30): the
	// binary's CPU per MB against the floor may grow by Tolerance at most.
	FloorRatios map[string]float64 `json:"floor_ratios"`
	// Budgets are "scenario.metric" → Wingman's accepted allocation figure (mallocs or KiB per
	// forwarded MB).
	Budgets map[string]float64 `json:"budgets"`
	// MemoryTolerance is the relative growth allowed for Memory (0.2: 20%, so that a 25%
	// regression fails with room to spare; the figures vary by about 2% run to run).
	MemoryTolerance float64 `json:"memory_tolerance"`
	// Memory are "scenario.metric" → Wingman's accepted size in KiB: idle anonymous memory and
	// PSS of the real binary (startup.early_anon_kb 2 s after ready; startup.idle_anon_kb and
	// idle_pss_kb after a garbage collection) and the binary itself (binary.size_kb). VmRSS
	// figures (…vmrss…, …vmhwm…) are refused: they are reported, never gated.
	Memory map[string]float64 `json:"memory"`
}

// LoadBaseline reads and checks a baseline file.
func LoadBaseline(path string) (*Baseline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	var base Baseline
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&base); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	if base.Tolerance < 0 || base.Tolerance > 10 {
		return nil, fmt.Errorf("baseline %s: tolerance %v out of [0, 10]", path, base.Tolerance)
	}
	if base.MemoryTolerance < 0 || base.MemoryTolerance > 10 {
		return nil, fmt.Errorf("baseline %s: memory_tolerance %v out of [0, 10]", path, base.MemoryTolerance)
	}
	for _, m := range []map[string]float64{base.Ratios, base.Budgets, base.Memory} {
		for k := range m {
			if strings.Contains(k, "vmrss") || strings.Contains(k, "vmhwm") {
				return nil, fmt.Errorf("baseline %s: %s is a VmRSS figure, reported for information and never gated "+
					"(gate anonymous memory or PSS)", path, k)
			}
		}
	}
	for k, v := range base.Memory {
		if !strings.HasSuffix(k, "_kb") {
			return nil, fmt.Errorf("baseline %s: memory figure %s is not in KiB (…_kb)", path, k)
		}
		if v <= 0 {
			return nil, fmt.Errorf("baseline %s: memory figure %s is %v, want > 0", path, k, v)
		}
	}
	for _, m := range []map[string]float64{base.Ratios, base.FloorRatios} {
		for k, v := range m {
			if v <= 0 {
				return nil, fmt.Errorf("baseline %s: ratio %s is %v, want > 0", path, k, v)
			}
		}
	}
	for k, v := range base.Budgets {
		if !strings.Contains(k, "alloc") {
			return nil, fmt.Errorf("baseline %s: budget %s is not an allocation figure", path, k)
		}
		if v <= 0 {
			return nil, fmt.Errorf("baseline %s: budget %s is %v, want > 0", path, k, v)
		}
	}
	return &base, nil
}

// scenarioOf is the scenario part of "scenario.metric".
func scenarioOf(metric string) string { s, _, _ := strings.Cut(metric, "."); return s }

// Check returns one line per regression. A gated figure of a scenario that did not run is
// skipped; one missing from a scenario that ran is a failure.
func (b *Baseline) Check(s *Summary) []string {
	ran := map[string]bool{}
	for k := range s.Figures {
		ran[scenarioOf(k)] = true
	}
	var fails []string
	limit := 1 + b.Tolerance
	for _, k := range sortedKeys(b.Ratios) {
		if !ran[scenarioOf(k)] {
			continue
		}
		f, ok := s.Figures[k]
		switch {
		case !ok || f.Ratio <= 0:
			fails = append(fails, fmt.Sprintf("%s: no ratio measured", k))
		case f.Ratio > b.Ratios[k]*limit:
			fails = append(fails, fmt.Sprintf("%s: ratio %.3f regressed past %.3f × %.2f (wingman %.4g, reference %.4g)",
				k, f.Ratio, b.Ratios[k], limit, f.Wingman, f.Reference))
		}
	}
	for _, k := range sortedKeys(b.FloorRatios) {
		if !ran[scenarioOf(k)] {
			continue
		}
		f, ok := s.Figures[k]
		switch {
		case !ok || f.FloorRatio <= 0:
			fails = append(fails, fmt.Sprintf("%s: no ratio to the floor forwarder measured", k))
		case f.FloorRatio > b.FloorRatios[k]*limit:
			fails = append(fails, fmt.Sprintf("%s: %.3f× the process floor regressed past %.3f × %.2f (wingman %.4g, floor %.4g; runs %.2f-%.2f)",
				k, f.FloorRatio, b.FloorRatios[k], limit, f.Wingman, f.Floor, f.FloorRatioMin, f.FloorRatioMax))
		}
	}
	for _, k := range sortedKeys(b.Budgets) {
		if !ran[scenarioOf(k)] {
			continue
		}
		f, ok := s.Figures[k]
		switch {
		case !ok || f.Wingman <= 0:
			fails = append(fails, fmt.Sprintf("%s: no allocation figure measured", k))
		case f.Wingman > b.Budgets[k]*limit:
			fails = append(fails, fmt.Sprintf("%s: %.4g over the budget %.4g × %.2f", k, f.Wingman, b.Budgets[k], limit))
		}
	}
	mlimit := 1 + b.MemoryTolerance
	for _, k := range sortedKeys(b.Memory) {
		if !ran[scenarioOf(k)] {
			continue
		}
		f, ok := s.Figures[k]
		switch {
		case !ok || f.Wingman <= 0:
			fails = append(fails, fmt.Sprintf("%s: not measured", k))
		case f.Wingman > b.Memory[k]*mlimit:
			fails = append(fails, fmt.Sprintf("%s: %.0f KiB grew past %.0f KiB × %.2f (+%.0f%%)", k, f.Wingman, b.Memory[k], mlimit,
				(f.Wingman/b.Memory[k]-1)*100))
		}
	}
	return fails
}

func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
