package perf

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// execSamples is how many times the startup scenario starts a pod only to time process start →
// Envoy exec'd, per run and agent: one start is at the mercy of the shared machine's scheduler.
const execSamples = 5

// startup measures, for one agent, process start → the Envoy stand-in exec'd (the median of
// execSamples starts, each stopped as soon as the stand-in reports), then starts one pod and
// reads its time to first config and certificate, after a settle the CPU it used to get there
// and its memory (early_*), and after one garbage collection its idle memory (idle_*).
//
// exec_cpu_ms is the agent's CPU time when the stand-in is exec'd: a CPU figure, so that its
// Wingman/reference ratio is steady on a loaded machine where wall times are not.
//
// exec_ms runs from just before the harness forks the agent to the stand-in's main package
// being initialised, so it holds the stand-in's own runtime start-up; the direct run (the
// harness starting the stand-in itself) measures that part, and Summarize subtracts it
// (added_exec_ms: the agent's share). With the real pilot-agent the agent execs the stand-in
// itself; with an agent child the harness starts the stand-in once the agent's sockets listen,
// as Istio's agent does.
func startup(ctx context.Context, e *env) (map[string]float64, []time.Duration, error) {
	var wall, cpu []float64
	for i := range execSamples {
		x, err := timeExec(ctx, e, fmt.Sprintf("x%d", i))
		if err != nil {
			return nil, nil, fmt.Errorf("start %d: %w", i, err)
		}
		wall, cpu = append(wall, ms(x.wall)), append(cpu, ms(x.cpu))
	}
	m := map[string]float64{"exec_ms": median(wall), "exec_min_ms": slices.Min(wall), "exec_cpu_ms": median(cpu)}
	if e.kind == Direct {
		// The stand-in's own start: its CPU time when its main package is reached.
		m["stub_init_cpu_ms"] = m["exec_cpu_ms"]
		delete(m, "exec_cpu_ms")
	}
	p, cfg, cert, err := startOne(ctx, e, podSpec{})
	if err != nil {
		return nil, nil, err
	}
	m["first_config_ms"] = ms(cfg)
	if e.kind == Direct {
		return m, nil, nil
	}
	if err := settle(ctx, 2*time.Second); err != nil {
		return nil, nil, err
	}
	early, err := ReadUsage(p.Agent.Pid())
	if err != nil {
		return nil, nil, fmt.Errorf("read idle usage: %w", err)
	}
	m["first_cert_ms"] = ms(cert)
	m["early_anon_kb"] = float64(early.AnonKB)
	m["early_pss_kb"] = float64(early.PssKB)
	m["early_vmrss_kb"] = float64(early.RSSKB) // for information; not gated
	m["startup_cpu_ms"] = ms(early.CPU)
	// An idle agent's runtime collects at least every two minutes, and whether its first
	// collection has run by a reading moves RssAnon by ~0.8 MiB (GC metadata) and brings back
	// binary pages the collector reads: the idle figures are taken after one, asked of the
	// agent's pprof handler (text form: no compressor is linked in or allocated for it).
	if err := p.collect(ctx); err != nil {
		return nil, nil, fmt.Errorf("garbage collection before the idle reading: %w", err)
	}
	if err := settle(ctx, time.Second); err != nil {
		return nil, nil, err
	}
	pr, err := read(ctx, p)
	if err != nil {
		return nil, nil, fmt.Errorf("read idle usage: %w", err)
	}
	m["idle_anon_kb"] = float64(pr.u.AnonKB)
	m["idle_pss_kb"] = float64(pr.u.PssKB)
	m["idle_vmrss_kb"] = float64(pr.u.RSSKB) // for information; not gated
	return m, nil, nil
}

// collect makes the agent run a garbage collection (net/http/pprof's heap?gc=1).
func (p *Pod) collect(ctx context.Context) error {
	if p.DebugAddr == "" {
		return fmt.Errorf("pod %s serves no pprof", p.ID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.DebugAddr+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", req.URL, resp.Status)
	}
	return nil
}

// execTiming is one start of a pod, up to its Envoy stand-in's main package.
type execTiming struct {
	wall time.Duration // process start → the stand-in's main package initialised
	// cpu is the agent's on-CPU time at that instant (for a direct run: the stand-in's own).
	cpu time.Duration
}

// timeExec starts a pod, waits for its stand-in's start event and stops the pod at once
// (SIGKILL to its groups: a drain would only slow the scenario down).
func timeExec(ctx context.Context, e *env, id string) (execTiming, error) {
	var x execTiming
	mark := e.hub.Mark()
	p, err := e.start(ctx, podSpec{id: id, quick: true})
	if err != nil {
		return x, err
	}
	defer e.kill(p)
	ev, err := e.hub.Wait(ctx, mark, "the stand-in's start at "+id, func(ev Event) bool {
		return ev.ID == id && ev.Ev == "start"
	})
	if err != nil {
		return x, err
	}
	cpu := ev.AgentCPU
	if e.kind == Direct {
		cpu = ev.CPU
	}
	if ev.T0 == 0 || cpu <= 0 {
		return x, fmt.Errorf("the stand-in's start event at %s has no start time or CPU reading: %+v", id, ev)
	}
	return execTiming{wall: time.Unix(0, ev.T0).Sub(p.Started), cpu: time.Duration(cpu)}, nil
}

// kill forgets a pod (first, so that the watcher does not take its end for a failure) and
// stops its processes without a grace period.
func (e *env) kill(p *Pod) {
	p.killed.Store(true)
	e.mu.Lock()
	e.pods = slices.DeleteFunc(e.pods, func(q *Pod) bool { return q == p })
	e.mu.Unlock()
	for _, s := range p.Stubs {
		s.Stop(0)
	}
	if p.Agent != nil {
		p.Agent.Stop(0)
	}
}
