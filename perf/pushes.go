package perf

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// phase measures an agent's CPU, allocations and peak memory over a stretch of pushes.
type phase struct {
	p      *Pod
	before probe
	idle   Usage
	peakKB int64 // highest anonymous memory above idle seen at the end of a push
}

func begin(ctx context.Context, p *Pod) (*phase, error) {
	pr, err := read(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("read usage before pushes: %w", err)
	}
	return &phase{p: p, before: pr, idle: pr.u}, nil
}

// beforePush resets the kernel's peak RSS (VmHWM) so the next reading is the push's own peak.
func (ph *phase) beforePush() {
	if ph.p.Agent != nil {
		ResetPeak(ph.p.Agent.Pid())
	}
}

func (ph *phase) afterPush() {
	if ph.p.Agent == nil {
		return
	}
	if u, err := ReadUsage(ph.p.Agent.Pid()); err == nil {
		ph.peakKB = max(ph.peakKB, u.PeakAnonKB()-ph.idle.AnonKB)
	}
}

// end returns the phase's figures for bytes forwarded.
func (ph *phase) end(ctx context.Context, bytes int, m map[string]float64) error {
	if ph.p.Agent == nil {
		return nil
	}
	after, err := read(ctx, ph.p)
	if err != nil {
		return fmt.Errorf("read usage after pushes: %w", err)
	}
	mb := float64(bytes) / 1e6
	m["mb_forwarded"] = mb
	m["idle_anon_kb"] = float64(ph.idle.AnonKB)
	m["idle_pss_kb"] = float64(ph.idle.PssKB)
	m["anon_after_kb"] = float64(after.u.AnonKB)
	m["peak_anon_above_idle_kb"] = float64(ph.peakKB)
	m["idle_vmrss_kb"] = float64(ph.idle.RSSKB) // for information; not gated
	m["vmrss_after_kb"] = float64(after.u.RSSKB)
	if mb > 0 {
		m["cpu_ms_per_mb"] = ms(after.u.CPU-ph.before.u.CPU) / mb
		if ph.before.allocsOK && after.allocsOK {
			m["mallocs_per_mb"] = float64(after.mallocs-ph.before.mallocs) / mb
			m["alloc_kb_per_mb"] = float64(after.allocsB-ph.before.allocsB) / 1024 / mb
		}
	}
	return nil
}

// pushSeq makes n pushes of gen(i), each after the previous one reached every stand-in in ids,
// and returns every latency and the bytes received in total.
func pushSeq(ctx context.Context, e *env, ph *phase, ids []string, n int, gen func(i int) map[string]types.Resource) ([]time.Duration, int, error) {
	var lat []time.Duration
	total := 0
	for i := range n {
		res := gen(i)
		mark := e.hub.Mark()
		ph.beforePush()
		v, t0, err := e.cp.Push(ClusterType, res)
		if err != nil {
			return nil, 0, err
		}
		got, err := e.hub.WaitAll(ctx, mark, ids, fmt.Sprintf("clusters version %s", v), func(ev Event) bool {
			return ev.Ev == "push" && ev.Type == ClusterType && ev.Version == v
		})
		if err != nil {
			return nil, 0, fmt.Errorf("push %d of %d: %w", i+1, n, err)
		}
		ph.afterPush()
		for _, ev := range got {
			lat = append(lat, ev.Time().Sub(t0))
			total += ev.Bytes
		}
	}
	return lat, total, nil
}

func latencyFigures(m map[string]float64, lat []time.Duration) {
	m["p50_ms"] = ms(percentile(lat, 50))
	m["p99_ms"] = ms(percentile(lat, 99))
	m["pushes"] = float64(len(lat))
}

// large pushes count messages of about size bytes in n clusters, one after another.
func large(size, n int) func(ctx context.Context, e *env) (map[string]float64, []time.Duration, error) {
	return func(ctx context.Context, e *env) (map[string]float64, []time.Duration, error) {
		// Enough pushes that CPU per MB is read over more than scheduling noise (the gate holds
		// it against the floor forwarder's within 25 %, short runs too): 20 of a few MB take
		// about a second.
		count := 20
		if size >= 8<<20 {
			count = 5
		}
		profiling := e.cfg.Profile != "" && e.kind != Direct
		p, _, _, err := startOne(ctx, e, podSpec{pushProf: profiling})
		if err != nil {
			return nil, nil, err
		}
		if err := settle(ctx, 500*time.Millisecond); err != nil {
			return nil, nil, err
		}
		ph, err := begin(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		gen := func(i int) map[string]types.Resource { return Clusters(n, size, fmt.Sprintf("v%d-", i)) }
		var lat []time.Duration
		var bytes int
		if profiling {
			lat, bytes, count, err = profilePushes(ctx, e, ph, p, gen)
		} else {
			lat, bytes, err = pushSeq(ctx, e, ph, p.StubIDs, count, gen)
		}
		if err != nil {
			return nil, nil, err
		}
		m := map[string]float64{}
		latencyFigures(m, lat)
		if err := ph.end(ctx, bytes, m); err != nil {
			return nil, nil, err
		}
		if c, ok := m["cpu_ms_per_mb"]; ok {
			m["cpu_ms_per_push"] = c * m["mb_forwarded"] / float64(count)
		}
		return m, lat, nil
	}
}

// smallRate pushes small updates every 5ms without waiting; the control plane coalesces what
// a stream has not ACKed yet, so the figures are over the versions delivered.
func smallRate(ctx context.Context, e *env) (map[string]float64, []time.Duration, error) {
	count := 200
	if e.short {
		count = 60
	}
	p, _, _, err := startOne(ctx, e, podSpec{})
	if err != nil {
		return nil, nil, err
	}
	ph, err := begin(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	mark := e.hub.Mark()
	sent := map[string]time.Time{}
	var last string
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := range count {
		v, t0, err := e.cp.Push(ClusterType, Clusters(20, 2<<10, fmt.Sprintf("s%d-", i)))
		if err != nil {
			return nil, nil, err
		}
		sent[v], last = t0, v
		select {
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		case <-tick.C:
		}
	}
	if _, err := e.hub.Wait(ctx, mark, "the last small push "+last, func(ev Event) bool {
		return ev.ID == p.ID && ev.Ev == "push" && ev.Version == last
	}); err != nil {
		return nil, nil, err
	}
	var lat []time.Duration
	bytes := 0
	for _, ev := range e.hub.Since(mark) {
		if t0, ok := sent[ev.Version]; ok && ev.Ev == "push" && ev.ID == p.ID {
			lat = append(lat, ev.Time().Sub(t0))
			bytes += ev.Bytes
		}
	}
	m := map[string]float64{"sent": float64(count)}
	latencyFigures(m, lat)
	if err := ph.end(ctx, bytes, m); err != nil {
		return nil, nil, err
	}
	return m, lat, nil
}

// downstreams runs ten Envoy streams through one agent and pushes 1 MB to all of them.
func downstreams(ctx context.Context, e *env) (map[string]float64, []time.Duration, error) {
	count := 3
	if e.short {
		count = 2
	}
	mark := e.hub.Mark()
	p, err := e.start(ctx, podSpec{extra: 9})
	if err != nil {
		return nil, nil, fmt.Errorf("start pod: %w", err)
	}
	if _, _, err := waitReady(ctx, e, mark, p); err != nil {
		return nil, nil, fmt.Errorf("pod ready: %w", err)
	}
	conns := e.cp.Accepted()
	ph, err := begin(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	lat, bytes, err := pushSeq(ctx, e, ph, p.StubIDs, count, func(i int) map[string]types.Resource {
		return Clusters(200, 1<<20, fmt.Sprintf("d%d-", i))
	})
	if err != nil {
		return nil, nil, err
	}
	m := map[string]float64{"upstream_conns": float64(conns)}
	latencyFigures(m, lat)
	if err := ph.end(ctx, bytes, m); err != nil {
		return nil, nil, err
	}
	return m, lat, nil
}

// certRotation keeps five live SDS clients while the CA signs 4-second certificates.
func certRotation(ctx context.Context, e *env) (map[string]float64, []time.Duration, error) {
	window := 12 * time.Second
	if e.short {
		window = 6 * time.Second
	}
	mark := e.hub.Mark()
	p, err := e.start(ctx, podSpec{extra: 4, secretTTL: 4 * time.Second})
	if err != nil {
		return nil, nil, fmt.Errorf("start pod: %w", err)
	}
	if _, _, err := waitReady(ctx, e, mark, p); err != nil {
		return nil, nil, fmt.Errorf("pod ready: %w", err)
	}
	before, err := read(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	wmark := e.hub.Mark()
	if err := settle(ctx, window); err != nil {
		return nil, nil, err
	}
	after, err := read(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	per := map[string]int{}
	for _, ev := range e.hub.Since(wmark) {
		if ev.Ev == "sds" && ev.Name == "default" {
			per[ev.ID]++
		}
	}
	least := -1
	for _, id := range p.StubIDs {
		if least < 0 || per[id] < least {
			least = per[id]
		}
	}
	if least < 1 {
		return nil, nil, fmt.Errorf("a stand-in got no rotated certificate in %v (per stand-in: %v)", window, per)
	}
	return map[string]float64{"rotations_min": float64(least), "ca_requests": float64(e.cp.CA.Requests()),
		"cpu_ms_per_s": ms(after.u.CPU-before.u.CPU) / window.Seconds(), "anon_kb": float64(after.u.AnonKB),
		"pss_kb": float64(after.u.PssKB), "vmrss_kb": float64(after.u.RSSKB)}, nil, nil
}

// istiodRestart restarts the control plane under a ready pod and measures how long until a
// new push reaches Envoy, and whether Envoy saw its stream fail.
func istiodRestart(ctx context.Context, e *env) (map[string]float64, []time.Duration, error) {
	p, _, _, err := startOne(ctx, e, podSpec{})
	if err != nil {
		return nil, nil, err
	}
	mark := e.hub.Mark()
	if err := e.cp.Restart(300 * time.Millisecond); err != nil {
		return nil, nil, fmt.Errorf("restart control plane: %w", err)
	}
	up := time.Now()
	v, _, err := e.cp.Push(ClusterType, Clusters(10, 10<<10, "after-restart"))
	if err != nil {
		return nil, nil, err
	}
	ev, err := e.hub.Wait(ctx, mark, "the push after the restart", func(ev Event) bool {
		return ev.ID == p.ID && ev.Ev == "push" && ev.Version == v
	})
	if err != nil {
		return nil, nil, err
	}
	drops := 0
	for _, x := range e.hub.Since(mark) {
		if x.ID == p.ID && x.Ev == "ads_error" {
			drops++
		}
	}
	return map[string]float64{"recover_ms": ms(ev.Time().Sub(up)), "envoy_stream_drops": float64(drops)}, nil, nil
}

// slowEnvoy pushes 4 MB eight times, 50ms apart, to a stand-in that pauses 300ms before each
// read: the agent must hold at most a bounded backlog and deliver the last version.
func slowEnvoy(ctx context.Context, e *env) (map[string]float64, []time.Duration, error) {
	count := 8
	if e.short {
		count = 5
	}
	p, _, _, err := startOne(ctx, e, podSpec{slowMS: 300})
	if err != nil {
		return nil, nil, err
	}
	ph, err := begin(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	ph.beforePush()
	mark := e.hub.Mark()
	var last string
	var t0 time.Time
	for i := range count {
		if last, t0, err = e.cp.Push(ClusterType, Clusters(100, 4<<20, fmt.Sprintf("slow%d-", i))); err != nil {
			return nil, nil, err
		}
		if err := settle(ctx, 50*time.Millisecond); err != nil {
			return nil, nil, err
		}
	}
	ev, err := e.hub.Wait(ctx, mark, "the last push to the slow Envoy", func(ev Event) bool {
		return ev.ID == p.ID && ev.Ev == "push" && ev.Version == last
	})
	if err != nil {
		return nil, nil, err
	}
	ph.afterPush()
	delivered, bytes := 0, 0
	for _, x := range e.hub.Since(mark) {
		if x.ID == p.ID && x.Ev == "push" && x.Type == ClusterType {
			delivered++
			bytes += x.Bytes
		}
	}
	m := map[string]float64{"final_ms": ms(ev.Time().Sub(t0)), "delivered": float64(delivered), "sent": float64(count)}
	if err := ph.end(ctx, bytes, m); err != nil {
		return nil, nil, err
	}
	return m, nil, nil
}

// profilePushes pushes gen(i) one after another for Config.ProfileSeconds, taking the real
// binary's CPU profile from its status port over that window (agent children and the floor
// forwarder profile their whole run themselves); it returns the latencies, the bytes and the
// number of pushes.
func profilePushes(ctx context.Context, e *env, ph *phase, p *Pod, gen func(i int) map[string]types.Resource) ([]time.Duration, int, int, error) {
	secs := e.cfg.ProfileSeconds
	if secs <= 0 {
		secs = 20
	}
	window := time.Duration(secs) * time.Second
	done := make(chan error, 1)
	if p.Binary {
		path := filepath.Join(e.cfg.Profile, fmt.Sprintf("%s-run%d-%s-%s.push.cpu.pprof", e.name, e.run, e.kind, p.ID))
		go func() {
			done <- fetch(ctx, "http://"+p.DebugAddr+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), path)
		}()
	} else {
		t := time.AfterFunc(window, func() { done <- nil })
		defer t.Stop()
	}
	var lat []time.Duration
	total := 0
	for i := 0; ; i++ {
		l, b, err := pushSeq(ctx, e, ph, p.StubIDs, 1, func(int) map[string]types.Resource { return gen(i) })
		if err != nil {
			return nil, 0, 0, err
		}
		lat, total = append(lat, l...), total+b
		select {
		case err := <-done:
			if err != nil {
				return nil, 0, 0, fmt.Errorf("CPU profile of the pushes: %w", err)
			}
			return lat, total, i + 1, nil
		default:
		}
	}
}
