package perf

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteReport writes report.md and latency.svg into dir and returns the report's path.
func WriteReport(dir string, rep *Report, s *Summary, command string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "latency.svg"), []byte(LatencySVG(rep)), 0o644); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, []byte(Markdown(rep, s, command)), 0o644); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return path, nil
}

// Markdown renders the report.
func Markdown(rep *Report, s *Summary, command string) string {
	var b strings.Builder
	wing := "Wingman's mux in lab/agentchild (the real binary was not given)"
	if rep.Binary {
		wing = fmt.Sprintf("the real pilot-agent binary (%.1f MiB stripped), `proxy sidecar`", float64(rep.BinarySize)/(1<<20))
	}
	fmt.Fprintf(&b, "# Wingman performance report\n\n")
	fmt.Fprintf(&b, "Run %s, %d interleaved run(s) per scenario%s, %v in all.\n\n", rep.Started.UTC().Format(time.RFC3339),
		rep.Runs, map[bool]string{true: " (short)", false: ""}[rep.Short], rep.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "Command: `%s`\n\n", command)
	fmt.Fprintf(&b, "- **wingman**: %s.\n", wing)
	fmt.Fprintf(&b, "- **reference**: lab/refagent in lab/agentchild, forwarding as Istio's agent does "+
		"(decode and re-encode, one new TLS upstream connection per Envoy stream), with the same SDS code.\n")
	fmt.Fprintf(&b, "- **direct**: the Envoy stand-in connected straight to the control plane's plaintext port.\n")
	fmt.Fprintf(&b, "- **floor**: lab/floorfwd, the process floor: TLS from the control plane, HTTP/2 DATA frames copied "+
		"to the stand-in's Unix socket, nothing else (no SDS); \"vs floor\" is wingman / floor, the median of per-run ratios.\n\n")
	if rep.Binary {
		fmt.Fprintf(&b, "Start-up figures compare unlike things: the binary renders the bootstrap and execs the "+
			"stand-in itself, while the harness starts the reference's stand-in once its sockets listen. The reference "+
			"child links Wingman's SDS too, so its memory is not that of Istio's agent (which also runs more); memory ratios "+
			"therefore flatter the reference.\n\n")
	}
	fmt.Fprintf(&b, "Control plane: go-control-plane's xDS server (LinearCache per type, Delta xDS) and an "+
		"Istio-compatible CA on one TLS port with a bearer token, on loopback. Envoy is lab/envoystub: it decodes "+
		"every resource, ACKs, and holds SDS streams for `default` and `ROOTCA`. Ratios are wingman / reference, "+
		"the median of per-run ratios; lower is better.\n\n")

	fmt.Fprintf(&b, "## Targets\n\n| target | want | measured | verdict |\n|---|---|---|---|\n")
	for _, t := range s.Targets {
		verdict := "not measured"
		if t.Measured {
			verdict = map[bool]string{true: "met", false: "**MISSED**"}[t.Pass]
		}
		got := t.Got
		if got == "" {
			got = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Want, got, verdict)
	}
	for _, t := range s.Targets {
		if t.Why != "" {
			fmt.Fprintf(&b, "\n- **%s missed**: %s.", t.Name, t.Why)
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "\n## Medians and ratios\n\n![latency distributions](latency.svg)\n\n")
	fmt.Fprintf(&b, "| scenario | figure | wingman | reference | direct | floor | ratio | runs' range | vs floor | runs' range |\n"+
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	keys := make([]string, 0, len(s.Figures))
	for k := range s.Figures {
		keys = append(keys, k)
	}
	order := map[string]int{"dense": 100}
	for n, sc := range scenarios {
		order[n] = sc.order
	}
	slices.SortFunc(keys, func(a, c string) int {
		if d := order[scenarioOf(a)] - order[scenarioOf(c)]; d != 0 {
			return d
		}
		return strings.Compare(a, c)
	})
	for _, k := range keys {
		f := s.Figures[k]
		sc, metric, _ := strings.Cut(k, ".")
		ratio, spread := "", ""
		if f.Ratio > 0 {
			ratio = fmt.Sprintf("%.3f", f.Ratio)
			spread = fmt.Sprintf("%.2f-%.2f", f.RatioMin, f.RatioMax)
		}
		direct, floor, fratio, fspread := "", "", "", ""
		if f.Direct != 0 {
			direct = num(f.Direct)
		}
		if f.Floor != 0 {
			floor = num(f.Floor)
		}
		if f.FloorRatio > 0 {
			fratio = fmt.Sprintf("%.3f", f.FloorRatio)
			fspread = fmt.Sprintf("%.2f-%.2f", f.FloorRatioMin, f.FloorRatioMax)
		}
		w, r := "—", "—"
		if f.HasWingman {
			w = num(f.Wingman)
		}
		if f.HasReference {
			r = num(f.Reference)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", sc, metric, w, r, direct, floor, ratio, spread, fratio, fspread)
	}
	fmt.Fprintf(&b, "\n%s\n", glossary)
	return b.String()
}

func num(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

const glossary = `## Figures

- *_ms: push latency percentiles, from the control plane's cache update to the stand-in holding the
  decoded response; added_* subtracts the direct figure of the same run.
- cpu_ms_per_mb: agent CPU time (all threads, /proc/<pid>/task/*/schedstat) per MB received by
  the stand-ins; mallocs_per_mb and alloc_kb_per_mb: Go heap allocations in the agent per MB
  (runtime memstats over expvar; the agent child only).
- Memory is judged by anonymous memory and PSS. *_anon_*: RssAnon (heap and stacks);
  *_pss_*: proportional set size (/proc/<pid>/smaps_rollup), which splits pages shared
  between agents (the binary) among them; peak_anon_above_idle_kb: the anonymous memory at
  the peak of each push (VmHWM, reset with /proc/<pid>/clear_refs before it, less the
  file-backed pages resident after it) minus RssAnon before the pushes.
- *_vmrss_*: VmRSS, for information only (no gate or target reads it): it counts the binary's
  mapped pages, which the kernel drops and faults back at will and agents on a node share.
- upstream_conns: TLS connections the control plane accepted (xDS and CA).
- slow_envoy: the stand-in pauses 300ms before each read while 4 MB pushes arrive 50ms apart;
  the control plane itself waits for ACKs, so "delivered" counts the versions that reached Envoy.
- istiod_restart: recover_ms runs from the control plane serving again to the next push reaching
  Envoy; envoy_stream_drops counts the ADS stream failures Envoy saw.
- dense: N pods, each agent with its stand-in; *_total_kb sum the agents only; per110_* scale to
  a 110-pod node.
`

// LatencySVG plots the cumulative distribution of push latency per scenario and agent.
func LatencySVG(rep *Report) string {
	type series struct {
		kind Kind
		lat  []time.Duration
	}
	panels := map[string][]series{}
	var names []string
	for _, r := range append(slices.Clone(rep.Results), rep.Dense...) {
		if len(r.Latencies) == 0 {
			continue
		}
		if _, ok := panels[r.Scenario]; !ok {
			names = append(names, r.Scenario)
		}
		ss := panels[r.Scenario]
		i := slices.IndexFunc(ss, func(s series) bool { return s.kind == r.Kind })
		if i < 0 {
			ss = append(ss, series{kind: r.Kind})
			i = len(ss) - 1
		}
		ss[i].lat = append(ss[i].lat, r.Latencies...)
		panels[r.Scenario] = ss
	}
	const pw, ph, cols = 420, 240, 2
	rows := (len(names) + cols - 1) / cols
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n",
		pw*cols, ph*max(rows, 1)+30)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	colors := map[Kind]string{Wingman: "#1f77b4", Reference: "#ff7f0e", Direct: "#7f7f7f", Floor: "#2ca02c"}
	lx := 10
	for _, k := range []Kind{Wingman, Reference, Direct, Floor} {
		fmt.Fprintf(&b, `<rect x="%d" y="8" width="12" height="12" fill="%s"/><text x="%d" y="18">%s</text>`+"\n", lx, colors[k], lx+16, k)
		lx += 100
	}
	fmt.Fprintf(&b, `<text x="%d" y="18">cumulative share of pushes vs latency (ms, log scale)</text>`+"\n", lx+10)
	for i, n := range names {
		x0, y0 := (i%cols)*pw, 30+(i/cols)*ph
		left, top, w, h := x0+45, y0+20, pw-65, ph-55
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range panels[n] {
			for _, d := range s.lat {
				v := math.Max(ms(d), 0.01)
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		llo, lhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if lhi <= llo {
			lhi = llo + 1
		}
		xOf := func(v float64) float64 {
			return float64(left) + (math.Log10(math.Max(v, 0.01))-llo)/(lhi-llo)*float64(w)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", left, y0+12, html.EscapeString(n))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", left, top, w, h)
		for e := llo; e <= lhi; e++ {
			x := xOf(math.Pow(10, e))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
				x, top, x, top+h, x, top+h+14, strconv.FormatFloat(math.Pow(10, e), 'g', -1, 64))
		}
		for _, q := range []float64{0, 0.5, 1} {
			y := float64(top+h) - q*float64(h)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.1f</text>`+"\n", left-4, y+4, q)
		}
		for _, s := range panels[n] {
			l := slices.Clone(s.lat)
			slices.Sort(l)
			var pts []string
			for j, d := range l {
				y := float64(top+h) - float64(j+1)/float64(len(l))*float64(h)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(ms(d)), y))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", colors[s.kind], strings.Join(pts, " "))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
