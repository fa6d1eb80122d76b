package perf

import (
	"context"
	"fmt"
	"os"
	"time"
)

// runDense starts cfg.Dense pods of one kind against one control plane, measures the agents'
// total anonymous memory, PSS and CPU at idle and during a mesh-wide push, and the push latency to every pod.
func runDense(ctx context.Context, cfg Config, hub *Hub, k Kind) (res Result, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, 3*cfg.ScenarioTimeout, fmt.Errorf("dense node timed out after %v", 3*cfg.ScenarioTimeout))
	defer cancel()
	dir, err := os.MkdirTemp(cfg.WorkDir, "d")
	if err != nil {
		return res, fmt.Errorf("make run directory: %w", err)
	}
	defer os.RemoveAll(dir)
	cp, err := StartControlPlane(ctx, ControlPlaneConfig{})
	if err != nil {
		return res, fmt.Errorf("start control plane: %w", err)
	}
	defer cp.Close()
	e := &env{cfg: cfg, cp: cp, hub: hub, dir: dir, kind: k, short: cfg.Short}
	defer e.stopAll()
	ctx, stopWatch := e.watch(ctx)
	defer stopWatch()
	if _, _, err := cp.Push(ClusterType, Clusters(50, 50<<10, "init")); err != nil {
		return res, err
	}
	if _, _, err := cp.Push(ListenerType, Listeners(2)); err != nil {
		return res, err
	}
	mark := hub.Mark()
	for i := range cfg.Dense {
		if _, err := e.start(ctx, podSpec{id: fmt.Sprintf("n%02d", i)}); err != nil {
			return res, fmt.Errorf("start pod %d: %w", i, err)
		}
	}
	_, certs, err := waitReady(ctx, e, mark, e.podList()...)
	if err != nil {
		if ferr := e.failed(); ferr != nil {
			err = fmt.Errorf("%w; %v", err, ferr)
		}
		return res, fmt.Errorf("pods ready: %w", err)
	}
	total := func() (Usage, error) {
		var sum Usage
		for _, p := range e.podList() {
			u, err := ReadUsage(p.Agent.Pid())
			if err != nil {
				return sum, fmt.Errorf("pod %s: %w", p.ID, err)
			}
			sum.RSSKB += u.RSSKB
			sum.AnonKB += u.AnonKB
			sum.FileKB += u.FileKB
			sum.PssKB += u.PssKB
			sum.HWMKB += u.HWMKB
			sum.CPU += u.CPU
		}
		return sum, nil
	}
	ready, err := total() // every pod has its first certificate and configuration
	if err != nil {
		return res, err
	}
	if err := settle(ctx, 3*time.Second); err != nil {
		return res, err
	}
	idle0, err := total()
	if err != nil {
		return res, err
	}
	window := 5 * time.Second
	if err := settle(ctx, window); err != nil {
		return res, err
	}
	idle1, err := total()
	if err != nil {
		return res, err
	}
	var ids []string
	for _, p := range e.podList() {
		ids = append(ids, p.StubIDs...)
		ResetPeak(p.Agent.Pid())
	}
	pmark := hub.Mark()
	v, t0, err := cp.Push(ClusterType, Clusters(200, 1<<20, "mesh-wide"))
	if err != nil {
		return res, err
	}
	got, err := hub.WaitAll(ctx, pmark, ids, "the mesh-wide push "+v, func(ev Event) bool {
		return ev.Ev == "push" && ev.Type == ClusterType && ev.Version == v
	})
	if err != nil {
		return res, err
	}
	pushed, err := total()
	if err != nil {
		return res, err
	}
	var lat []time.Duration
	var last time.Time
	for _, ev := range got {
		lat = append(lat, ev.Time().Sub(t0))
		if ev.Time().After(last) {
			last = ev.Time()
		}
	}
	m := map[string]float64{
		"pods": float64(cfg.Dense),
		// Start-up on a dense node: CPU per agent until every pod is ready, and until 3 s later
		// (work deferred past readiness, such as a look-ahead key, shows there); time from each
		// agent's start to its first certificate at its stand-in.
		"startup_cpu_ms_per_agent":    ms(ready.CPU) / float64(cfg.Dense),
		"startup_3s_cpu_ms_per_agent": ms(idle0.CPU) / float64(cfg.Dense),
		"first_cert_ms_p50":           ms(percentile(certs, 50)),
		"first_cert_ms_p90":           ms(percentile(certs, 90)),
		"idle_anon_total_kb":          float64(idle1.AnonKB),
		"idle_pss_total_kb":           float64(idle1.PssKB),
		"per110_idle_pss_mb":          float64(idle1.PssKB) / 1024 * 110 / float64(cfg.Dense),
		"idle_cpu_ms_per_s":           ms(idle1.CPU-idle0.CPU) / window.Seconds(),
		"push_cpu_ms":                 ms(pushed.CPU - idle1.CPU),
		"push_peak_anon_total_kb":     float64(pushed.PeakAnonKB()),
		"push_all_ms":                 ms(last.Sub(t0)),
		"upstream_conns":              float64(cp.Accepted()),
		// VmRSS, for information only: it counts the binary's shared pages once per agent.
		"idle_vmrss_total_kb":  float64(idle1.RSSKB),
		"per110_idle_vmrss_mb": float64(idle1.RSSKB) / 1024 * 110 / float64(cfg.Dense),
		"per110_push_cpu_ms":   ms(pushed.CPU-idle1.CPU) * 110 / float64(cfg.Dense),
		"per110_idle_cpu_mcpu": ms(idle1.CPU-idle0.CPU) / window.Seconds() * 110 / float64(cfg.Dense),
	}
	latencyFigures(m, lat)
	return Result{Scenario: "dense", Kind: k, Metrics: m, Latencies: lat}, nil
}
