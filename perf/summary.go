package perf

import (
	"fmt"
	"slices"
	"strings"
)

// Figure is one metric of one scenario: the medians over runs for each agent, and the median
// of the per-run ratios Wingman / reference (runs are interleaved, so each ratio compares two
// measurements taken moments apart).
type Figure struct {
	Wingman   float64 `json:"wingman"`
	Reference float64 `json:"reference"`
	Direct    float64 `json:"direct,omitempty"`
	Floor     float64 `json:"floor,omitempty"` // the floor forwarder (lab/floorfwd), where it ran
	Ratio     float64 `json:"ratio,omitempty"` // 0 when not defined
	// RatioMin and RatioMax are the spread of the per-run ratios.
	RatioMin float64 `json:"ratio_min,omitempty"`
	RatioMax float64 `json:"ratio_max,omitempty"`
	// FloorRatio is the median of the per-run ratios Wingman / floor forwarder (same run), with
	// its spread; 0 where the floor did not run.
	FloorRatio    float64 `json:"floor_ratio,omitempty"`
	FloorRatioMin float64 `json:"floor_ratio_min,omitempty"`
	FloorRatioMax float64 `json:"floor_ratio_max,omitempty"`
	// Which agents measured it (a figure may exist for one only, e.g. allocations).
	HasWingman   bool `json:"-"`
	HasReference bool `json:"-"`
}

// Target is one of the targets, checked against what was measured.
type Target struct {
	Name     string `json:"name"`
	Want     string `json:"want"`
	Got      string `json:"got"`
	Pass     bool   `json:"pass"`
	Measured bool   `json:"measured"`
	Why      string `json:"why,omitempty"` // for a miss: what the figures say about it
}

// Summary is what the report and the gate read.
type Summary struct {
	Figures map[string]Figure `json:"figures"` // "scenario.metric"
	Targets []Target          `json:"targets"`
}

// addedFloorMS keeps ratios of added latency finite when an agent adds next to nothing.
const addedFloorMS = 0.1

// Summarize aggregates a report: medians per agent, per-run ratios, added latency (through the
// agent minus direct, in the same run) and the targets.
func Summarize(rep *Report) *Summary {
	type key struct {
		scen, metric string
		kind         Kind
	}
	vals := map[key][]float64{}
	ratios := map[[2]string][]float64{}
	floorRatios := map[[2]string][]float64{}
	byRun := map[string]map[int]map[Kind]map[string]float64{}
	for _, r := range append(slices.Clone(rep.Results), rep.Dense...) {
		if byRun[r.Scenario] == nil {
			byRun[r.Scenario] = map[int]map[Kind]map[string]float64{}
		}
		if byRun[r.Scenario][r.Run] == nil {
			byRun[r.Scenario][r.Run] = map[Kind]map[string]float64{}
		}
		byRun[r.Scenario][r.Run][r.Kind] = r.Metrics
	}
	for scen, runs := range byRun {
		for _, kinds := range runs {
			if d, ok := kinds[Direct]; ok {
				for _, k := range []Kind{Wingman, Reference, Floor} {
					if m, ok := kinds[k]; ok {
						if _, ok := d["p50_ms"]; ok {
							m["added_p50_ms"] = m["p50_ms"] - d["p50_ms"]
							m["added_p99_ms"] = m["p99_ms"] - d["p99_ms"]
						}
						if de, ok := d["exec_ms"]; ok {
							m["added_exec_ms"] = m["exec_ms"] - de // the agent's share of start → Envoy exec'd
						}
					}
				}
			}
			for k, m := range kinds {
				for name, v := range m {
					vals[key{scen, name, k}] = append(vals[key{scen, name, k}], v)
				}
			}
			w, r, fl := kinds[Wingman], kinds[Reference], kinds[Floor]
			if w != nil && fl != nil {
				for name, wv := range w {
					fv, ok := fl[name]
					if strings.HasPrefix(name, "added_") {
						wv, fv = max(wv, addedFloorMS), max(fv, addedFloorMS)
					}
					if ok && fv > 0 {
						floorRatios[[2]string{scen, name}] = append(floorRatios[[2]string{scen, name}], wv/fv)
					}
				}
			}
			if w == nil || r == nil {
				continue
			}
			for name, wv := range w {
				rv, ok := r[name]
				if strings.HasPrefix(name, "added_") {
					wv, rv = max(wv, addedFloorMS), max(rv, addedFloorMS)
				}
				if ok && rv > 0 {
					ratios[[2]string{scen, name}] = append(ratios[[2]string{scen, name}], wv/rv)
				}
			}
		}
	}
	s := &Summary{Figures: map[string]Figure{}}
	for k, v := range vals {
		name := k.scen + "." + k.metric
		f := s.Figures[name]
		switch k.kind {
		case Wingman:
			f.Wingman, f.HasWingman = median(v), true
		case Reference:
			f.Reference, f.HasReference = median(v), true
		case Direct:
			f.Direct = median(v)
		case Floor:
			f.Floor = median(v)
		}
		s.Figures[name] = f
	}
	for k, v := range ratios {
		name := k[0] + "." + k[1]
		f := s.Figures[name]
		f.Ratio, f.RatioMin, f.RatioMax = median(v), slices.Min(v), slices.Max(v)
		s.Figures[name] = f
	}
	for k, v := range floorRatios {
		name := k[0] + "." + k[1]
		f := s.Figures[name]
		f.FloorRatio, f.FloorRatioMin, f.FloorRatioMax = median(v), slices.Min(v), slices.Max(v)
		s.Figures[name] = f
	}
	if rep.BinarySize > 0 {
		// A figure of its own, so that the gate can hold the binary's size like any byte count.
		s.Figures["binary.size_kb"] = Figure{Wingman: float64(rep.BinarySize) / 1024, HasWingman: true}
	}
	s.Targets = targets(rep, s)
	return s
}

func targets(rep *Report, s *Summary) []Target {
	var out []Target
	ratio := func(name, metric string, limit float64) {
		t := Target{Name: name, Want: fmt.Sprintf("≤ %.2f× the reference", limit)}
		if f, ok := s.Figures[metric]; ok && f.Ratio > 0 {
			t.Measured, t.Got, t.Pass = true, fmt.Sprintf("%.3f×", f.Ratio), f.Ratio <= limit
		}
		out = append(out, t)
	}
	abs := func(name, metric, unit string, scale, limit float64) {
		t := Target{Name: name, Want: fmt.Sprintf("≤ %.1f %s", limit, unit)}
		if f, ok := s.Figures[metric]; ok && f.Wingman > 0 {
			v := f.Wingman / scale
			t.Measured, t.Got, t.Pass = true, fmt.Sprintf("%.1f %s", v, unit), v <= limit
		}
		out = append(out, t)
	}
	fig := func(k string) Figure { return s.Figures[k] }
	why := func(format string, args ...any) {
		if t := &out[len(out)-1]; t.Measured && !t.Pass {
			t.Why = fmt.Sprintf(format, args...)
		}
	}
	ratio("push latency added by the agent, 4 MB (p50)", "large_4mb.added_p50_ms", 0.3)
	a := fig("large_4mb.added_p50_ms")
	if t := &out[len(out)-1]; t.Measured {
		// Issue 30: the median at most 0.3x, and every run at most 0.5x.
		t.Want += ", every run ≤ 0.50×"
		t.Got += fmt.Sprintf(" (runs %.2f-%.2f)", a.RatioMin, a.RatioMax)
		t.Pass = t.Pass && a.RatioMax <= 0.5
	}
	why("per-run ratios ranged %.2f-%.2f: added p50 %.1f ms (wingman) vs %.1f ms (reference) over a direct p50 of %.1f ms, "+
		"so a few ms of scheduling noise on this shared 2-core machine moves the ratio across the line",
		a.RatioMin, a.RatioMax, a.Wingman, a.Reference, fig("large_4mb.p50_ms").Direct)
	ratio("agent CPU per forwarded MB (4 MB pushes)", "large_4mb.cpu_ms_per_mb", 0.25)
	c := fig("large_4mb.cpu_ms_per_mb")
	why("wingman %.2f vs reference %.2f ms/MB (runs %.2f-%.2f). Both agents decrypt TLS from the control plane "+
		"and frame HTTP/2 to Envoy; Wingman saves the decode and re-encode (heap allocated per MB: %s) and forwards "+
		"as it reads, but every byte still crosses two sockets and TLS, the floor's own work (bench/README.md)",
		c.Wingman, c.Reference, c.RatioMin, c.RatioMax, allocRatio(s))
	fl := Target{Name: "agent CPU per forwarded MB (4 MB pushes) against the process floor (lab/floorfwd, same run)", Want: "≤ 1.30× the floor"}
	if c.FloorRatio > 0 {
		fl.Measured, fl.Pass = true, c.FloorRatio <= 1.3
		fl.Got = fmt.Sprintf("%.3f× (runs %.2f-%.2f; wingman %.2f, floor %.2f ms/MB)", c.FloorRatio, c.FloorRatioMin, c.FloorRatioMax, c.Wingman, c.Floor)
	}
	out = append(out, fl)
	why("perf/results/profile-binary.md places the CPU above the floor function by function")
	abs("peak anonymous memory above idle during a 10 MB push (cut-through)", "large_10mb.peak_anon_above_idle_kb", "MiB", 1024, 2)
	abs("process start → Envoy exec'd, the agent's share (median, wall time)", "startup.added_exec_ms", "ms", 1, 8)
	why("wall time on a shared machine: %.1f ms from start to the stand-in's main (%.1f ms of it the stand-in's own start); "+
		"the agent had used %.1f ms of CPU by then (%.2f× the reference's)", fig("startup.exec_ms").Wingman, fig("startup.exec_ms").Direct,
		fig("startup.exec_cpu_ms").Wingman, fig("startup.exec_cpu_ms").Ratio)
	abs("idle anonymous memory of one agent (RssAnon)", "startup.idle_anon_kb", "MiB", 1024, 4)
	why("read after a GC asked of the agent's pprof handler (which itself allocates); 2 s after ready, "+
		"before any GC: %.1f MiB anonymous", fig("startup.early_anon_kb").Wingman/1024)
	if t := &out[len(out)-1]; t.Measured {
		// VmRSS adds the binary's mapped pages, which the kernel drops and faults back at will
		// and agents on one node share: shown beside, never judged.
		t.Got += fmt.Sprintf(" (VmRSS %.1f MiB, for information)", fig("startup.idle_vmrss_kb").Wingman/1024)
	}
	bin := Target{Name: "stripped pilot-agent binary", Want: "≤ 14.0 MiB"}
	if rep.BinarySize > 0 {
		v := float64(rep.BinarySize) / (1 << 20)
		// Bytes too: a size near the line must not read as "15.0 ≤ 15.0".
		bin.Measured, bin.Got, bin.Pass = true, fmt.Sprintf("%.2f MiB (%d B)", v, rep.BinarySize), v <= 14
	}
	out = append(out, bin)
	why("the harness measures the size only and does not analyse it; `go tool nm -size -sort size` on an " +
		"unstripped build shows what weighs most")
	// Together means what the node spends: PSS counts the pages the agents share (the binary's
	// text) once; the sum of VmRSS counts them once per agent and is shown beside it, for
	// information.
	dense := Target{Name: "50 idle agents together (PSS; sum of VmRSS in brackets, for information)", Want: "≤ 600 MiB"}
	if f, ok := s.Figures["dense.idle_pss_total_kb"]; ok && f.Wingman > 0 {
		pods := s.Figures["dense.pods"].Wingman
		v := f.Wingman / 1024 * 50 / pods
		rss := s.Figures["dense.idle_vmrss_total_kb"].Wingman / 1024 * 50 / pods
		dense.Measured, dense.Got, dense.Pass = true, fmt.Sprintf("%.0f MiB (%.0f MiB; %.0f pods measured)", v, rss, pods), v <= 600
	}
	out = append(out, dense)
	pss := Target{Name: "idle PSS per agent on the dense node", Want: "≤ 4.0 MiB"}
	if f, ok := s.Figures["dense.idle_pss_total_kb"]; ok && f.Wingman > 0 {
		v := f.Wingman / 1024 / s.Figures["dense.pods"].Wingman
		pss.Measured, pss.Got, pss.Pass = true, fmt.Sprintf("%.2f MiB", v), v <= 4
	}
	return append(out, pss)
}

// allocRatio formats the heap-bytes-per-MB ratio of the 4 MB pushes, where measured.
func allocRatio(s *Summary) string {
	if f, ok := s.Figures["large_4mb.alloc_kb_per_mb"]; ok && f.Ratio > 0 {
		return fmt.Sprintf("%.2f× the reference", f.Ratio)
	}
	return "measured on the agent child only"
}
