package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	mdns "github.com/miekg/dns"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/ndspb"
	"github.com/wingman-mesh/wingman/lab/controlplane"
	"github.com/wingman-mesh/wingman/lab/netem"
	"github.com/wingman-mesh/wingman/laststate"
	"github.com/wingman-mesh/wingman/perf"
)

// bigPush pushes 10 MB of clusters (forwarded cut-through, and with the setting on spooled as it
// passes) and returns its version and the agent's memory once the stand-in has it: RssAnon and
// the live heap after a GC.
func bigPush(ctx context.Context, r *Rig) (string, string, error) {
	v := r.Push(100, 10<<20, "big-")
	if _, err := waitVersion(ctx, r, 0, v); err != nil {
		return v, "", err
	}
	m, err := r.Read(ctx, true)
	if err != nil {
		return v, "", err
	}
	return v, fmt.Sprintf("10 MB push %s: agent RssAnon %d KiB, live heap %d KiB", v, m.AnonKB, m.HeapAlloc>>10), nil
}

// restartedConfig waits, after mark, for the stand-in's clusters at version v, its listeners and
// its workload certificate, and returns when the last of them arrived.
func restartedConfig(ctx context.Context, r *Rig, mark int, v string) (time.Time, error) {
	var last time.Time
	for _, w := range []struct {
		what  string
		match func(perf.Event) bool
	}{
		{"clusters " + v, func(e perf.Event) bool { return e.Ev == "push" && e.Type == perf.ClusterType && e.Version == v }},
		{"listeners", func(e perf.Event) bool { return e.Ev == "push" && e.Type == perf.ListenerType }},
		{"certificate", func(e perf.Event) bool { return e.Ev == "sds" && e.Name == "default" }},
	} {
		e, err := r.Hub.Wait(ctx, mark, w.what+" at the restarted stand-in", w.match)
		if err != nil {
			return last, r.wrap(err)
		}
		if e.Time().After(last) {
			last = e.Time()
		}
	}
	return last, nil
}

// waitSnapshot waits until the agent's snapshot holds clusters at version v (the file has no
// event of its own: it is read again every 50 ms).
func waitSnapshot(ctx context.Context, r *Rig, v string) error {
	for {
		if s, err := laststate.Load(r.ProxyDir(), 0); err == nil {
			s.Close()
			for _, st := range s.Streams {
				for _, resp := range st.Responses {
					if resp.TypeURL == perf.ClusterType && resp.Version == v {
						return nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return r.wrap(fmt.Errorf("no snapshot with clusters %s: %w", v, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// dnsAddr is the agent's DNS proxy inside the pod namespace (DNS_PROXY_ADDR in last_state).
const dnsAddr = "127.0.0.1:15053"

// meshHost is the mesh name last_state's NameTables give an address.
const meshHost = "reviews.default.svc.cluster.local"

// setNameTable has Istiod serve a NameTable giving meshHost the address ip.
func setNameTable(cp *controlplane.Server, ip string) {
	cp.Cache(fastpath.NameTableType).SetResources(map[string]types.Resource{"": &ndspb.NameTable{Table: map[string]*ndspb.NameTable_NameInfo{
		meshHost: {Ips: []string{ip}, Registry: "Kubernetes", Shortname: "reviews", Namespace: "default"}}}})
}

// resolveIn asks the agent's DNS proxy, from inside the pod namespace over UDP with miekg/dns,
// for meshHost's address: the address, or the rcode's name when there is none.
func resolveIn(ctx context.Context, r *Rig) (string, error) {
	c, err := netem.Dialer(r.Net.A)(ctx, "udp", dnsAddr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	q := new(mdns.Msg)
	q.SetQuestion(meshHost+".", mdns.TypeA)
	co := &mdns.Conn{Conn: c}
	if err := co.WriteMsg(q); err != nil {
		return "", err
	}
	resp, err := co.ReadMsg()
	if err != nil {
		return "", err
	}
	for _, rr := range resp.Answer {
		if a, ok := rr.(*mdns.A); ok {
			return a.A.String(), nil
		}
	}
	return mdns.RcodeToString[resp.Rcode], nil
}

// waitResolves asks until the DNS proxy answers meshHost with ip (every 20 ms, the figure's
// resolution, as readiness is polled) and returns when it did.
func waitResolves(ctx context.Context, r *Rig, ip string) (time.Time, error) {
	last := "no answer"
	for {
		if got, err := resolveIn(ctx, r); err == nil && got == ip {
			return time.Now(), nil
		} else if err != nil {
			last = err.Error()
		} else {
			last = got
		}
		select {
		case <-ctx.Done():
			return time.Time{}, r.wrap(fmt.Errorf("%s never answered %s (last: %s): %w", meshHost, ip, last, ctx.Err()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// lastState (issue 31): WINGMAN_LAST_STATE on, the proxy directory a tmpfs. The agent and the
// stand-in are killed and started again, first with Istiod up (the baseline), then with Istiod
// down: the stand-in must hold its clusters, listeners and certificate within 1 s of the start,
// and readiness must come as with Istiod up. Istiod then comes back with a newer push: it must
// reach the stand-in on the same stream (0 resets), nothing older than the snapshot (0 stale).
// The agent proxies DNS (ISTIO_META_DNS_CAPTURE): with Istiod down its DNS proxy answers a mesh
// name from the snapshot's NameTable (readiness, which waits for a table, holds), and Istiod's
// newer table replaces it when Istiod is back.
func lastState(t *testing.T, w *world) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg := RigConfig{Bins: w.bins, Env: []string{"WINGMAN_LAST_STATE=true", "ISTIO_META_DNS_CAPTURE=true", "DNS_PROXY_ADDR=" + dnsAddr}, ProxyTmpfs: true,
		Serve: func(cp *controlplane.Server) { setNameTable(cp, "10.0.0.1") }}
	r, err := NewRig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if _, err := waitResolves(ctx, r, "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	big, mem, err := bigPush(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitSnapshot(ctx, r, big); err != nil {
		t.Fatal(err)
	}
	memAfter, err := r.Read(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(r.ProxyDir(), laststate.FileName))
	if err != nil {
		t.Fatal(err)
	}

	// Baseline: restart with Istiod up.
	if err := r.KillAgent(ctx); err != nil {
		t.Fatal(err)
	}
	mark := r.Hub.Mark()
	t0, err := r.RestartAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	liveCfg, err := restartedConfig(ctx, r, mark, big)
	if err != nil {
		t.Fatal(err)
	}
	liveReady, err := r.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	liveCfgD, liveReadyD := liveCfg.Sub(t0), liveReady.Sub(t0)

	// Istiod down; the agent and the stand-in die and start again.
	r.StopCP()
	if err := r.KillAgent(ctx); err != nil {
		t.Fatal(err)
	}
	mark = r.Hub.Mark()
	t0, err = r.RestartAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	restoredCfg, err := restartedConfig(ctx, r, mark, big)
	if err != nil {
		t.Fatal(err)
	}
	restoredReady, err := r.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	restoredCfgD, restoredReadyD := restoredCfg.Sub(t0), restoredReady.Sub(t0)
	dnsRestored, dnsErr := resolveIn(ctx, r) // answered from the snapshot's table, Istiod down
	memRestored, err := r.Read(ctx, true)
	if err != nil {
		t.Fatal(r.wrap(err))
	}
	logLines := strings.Count(r.out.Last(200), "serving the last-state snapshot until Istiod answers")

	// Istiod back with a newer version and another NameTable.
	v := r.Push(10, 10<<10, "after-restore-")
	setNameTable(r.CP, "10.0.0.2")
	markBack := r.Hub.Mark()
	back := time.Now()
	if err := r.ServeCP(0); err != nil {
		t.Fatal(err)
	}
	e, err := waitVersion(ctx, r, mark, v)
	if err != nil {
		t.Fatal(err)
	}
	handover := e.Time().Sub(back)
	// The CA signs a new certificate at once (the restored one is due for rotation): pushed.
	ce, err := r.Hub.Wait(ctx, markBack, "the CA's certificate after Istiod is back", func(e perf.Event) bool { return e.Ev == "sds" && e.Name == "default" })
	if err != nil {
		t.Fatal(r.wrap(err))
	}
	certBack := ce.Time().Sub(back)
	dnsAt, err := waitResolves(ctx, r, "10.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	dnsBack := dnsAt.Sub(back)
	if err := waitSnapshot(ctx, r, v); err != nil {
		t.Fatal(err)
	}
	versions, resets := pushes(r, mark)
	var fails []string
	if restoredCfgD > time.Second {
		fails = append(fails, fmt.Sprintf("configuration and certificate %v after the start, over 1 s", restoredCfgD.Round(time.Millisecond)))
	}
	if dnsErr != nil || dnsRestored != "10.0.0.1" {
		fails = append(fails, fmt.Sprintf("with Istiod down the DNS proxy answered %s %q (%v), want the snapshot's 10.0.0.1", meshHost, dnsRestored, dnsErr))
	}
	if logLines != 1 {
		fails = append(fails, fmt.Sprintf("%d log lines saying which snapshot is served, want 1", logLines))
	}
	if s := stale(versions); s > 0 {
		fails = append(fails, fmt.Sprintf("%d stale", s))
	}
	if resets > 0 {
		fails = append(fails, fmt.Sprintf("%d Envoy resets", resets))
	}
	w.add(t, row{"last_state (WINGMAN_LAST_STATE on: Istiod down, agent and Envoy killed and started again)",
		fmt.Sprintf("%s; snapshot %d B (mode %v), agent after it was written: RssAnon %d KiB, live heap %d KiB; Istiod down: clusters, listeners and certificate at the stand-in %v after the start, ready %v (Istiod up: %v and %v), DNS proxy answers %s from the snapshot's NameTable: %s, agent serving it: RssAnon %d KiB, live heap %d KiB; Istiod back with %s: at the stand-in after %v, the CA's certificate after %v, Istiod's NameTable answered after %v, versions %v, stale %d, Envoy resets %d",
			mem, st.Size(), st.Mode().Perm(), memAfter.AnonKB, memAfter.HeapAlloc>>10, restoredCfgD.Round(time.Millisecond), restoredReadyD.Round(time.Millisecond),
			liveCfgD.Round(time.Millisecond), liveReadyD.Round(time.Millisecond), meshHost, dnsRestored, memRestored.AnonKB, memRestored.HeapAlloc>>10, v, handover.Round(time.Millisecond), certBack.Round(time.Millisecond), dnsBack.Round(time.Millisecond), versions, stale(versions), resets),
		"config and certificate ≤ 1 s after the start, ready as with Istiod up, mesh names resolve from the snapshot, 0 resets, 0 stale", verdict(fails)})
	if len(fails) > 0 {
		logResets(t, r)
		t.Error(verdict(fails))
	}
}

// lastStateOff: the same restart with the setting off (the default): no snapshot is written, and
// as today the restarted stand-in gets nothing while Istiod is down; it gets Istiod's state when
// Istiod is back.
func lastStateOff(t *testing.T, w *world) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg := RigConfig{Bins: w.bins, ProxyTmpfs: true}
	r, err := NewRig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	_, mem, err := bigPush(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	r.StopCP()
	if err := r.KillAgent(ctx); err != nil {
		t.Fatal(err)
	}
	mark := r.Hub.Mark()
	if _, err := r.RestartAgent(cfg); err != nil {
		t.Fatal(err)
	}
	// The stand-in starts and opens its streams; with nothing restored it gets no clusters.
	if _, err := r.Hub.Wait(ctx, mark, "the restarted stand-in", func(e perf.Event) bool { return e.Ev == "start" }); err != nil {
		t.Fatal(r.wrap(err))
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second) // as long as the restored case had 3× over
	_, gotEarly := r.Hub.Wait(wctx, mark, "clusters", func(e perf.Event) bool { return e.Ev == "push" && e.Type == perf.ClusterType })
	wcancel()
	_, snapErr := os.Stat(filepath.Join(r.ProxyDir(), laststate.FileName))
	back := time.Now()
	if err := r.ServeCP(0); err != nil {
		t.Fatal(err)
	}
	e, err := waitVersion(ctx, r, mark, "cds-2")
	if err != nil {
		t.Fatal(err)
	}
	_, resets := pushes(r, mark)
	var fails []string
	if gotEarly == nil {
		fails = append(fails, "clusters reached the stand-in while Istiod was down")
	}
	if snapErr == nil {
		fails = append(fails, "a snapshot was written with the setting off")
	}
	if resets > 0 {
		fails = append(fails, fmt.Sprintf("%d Envoy resets", resets))
	}
	w.add(t, row{"last_state_off (the default: the same restart without the setting)",
		fmt.Sprintf("%s; no snapshot file (%v); nothing at the stand-in during 3 s of Istiod down; clusters %v after Istiod is back; Envoy resets %d",
			mem, snapErr != nil, e.Time().Sub(back).Round(time.Millisecond), resets),
		"as today: no snapshot, nothing served until Istiod is back", verdict(fails)})
	if len(fails) > 0 {
		t.Error(verdict(fails))
	}
}

// ackWindow is what the control plane saw of the agent's first Delta CDS stream once Istiod is
// back: the replay's initial_resource_versions and the first response's updates and removals.
// Guarded by mu.
type ackWindow struct {
	mu       sync.Mutex
	armed    bool
	replay   []string // names of the first CDS request's initial_resource_versions
	replayed bool
	updated  int
	removed  []string
	first    chan struct{} // closed when Istiod's first CDS response is sent
}

func (a *ackWindow) callbacks() serverv3.Callbacks {
	return serverv3.CallbackFuncs{
		StreamDeltaRequestFunc: func(_ int64, req *discovery.DeltaDiscoveryRequest) error {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.armed && !a.replayed && req.GetTypeUrl() == perf.ClusterType {
				a.replayed = true
				for n := range req.GetInitialResourceVersions() {
					a.replay = append(a.replay, n)
				}
			}
			return nil
		},
		StreamDeltaResponseFunc: func(_ int64, _ *discovery.DeltaDiscoveryRequest, resp *discovery.DeltaDiscoveryResponse) {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.armed && resp.GetTypeUrl() == perf.ClusterType && a.first != nil {
				a.updated, a.removed = len(resp.GetResources()), resp.GetRemovedResources()
				close(a.first)
				a.first = nil
			}
		},
	}
}

// lastStateAckWindow (issue 31, the Delta ACK window): WINGMAN_LAST_STATE on, Istiod down, the
// agent and the stand-in killed and started again; the restarted stand-in holds its answers
// (PERF_ACK_HOLD, an Envoy still applying a large configuration), so the restored clusters have
// reached it and are not ACKed when Istiod comes back. Istiod dropped one cluster and changed
// the others meanwhile. Only once Istiod has sent its first CDS response is the stand-in
// released: that response must remove the dropped cluster (Istiod, like go-control-plane's
// LinearCache here, removes only names it knows the client has, so the agent's replay must name
// what the stand-in was sent, not only what it ACKed), and the stand-in must end with Istiod's
// clusters alone, at Istiod's version, on the same stream (0 resets), nothing stale.
func lastStateAckWindow(t *testing.T, w *world) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	aw := &ackWindow{}
	cfg := RigConfig{Bins: w.bins, Env: []string{"WINGMAN_LAST_STATE=true"}, ProxyTmpfs: true, Callbacks: aw.callbacks()}
	r, err := NewRig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	const n, size = 20, 4 << 20 // a large configuration: 20 clusters, 4 MB
	v1 := r.Push(n, size, "before-")
	if _, err := waitVersion(ctx, r, 0, v1); err != nil {
		t.Fatal(err)
	}
	if err := waitSnapshot(ctx, r, v1); err != nil {
		t.Fatal(err)
	}

	r.StopCP()
	if err := r.KillAgent(ctx); err != nil {
		t.Fatal(err)
	}
	mark := r.Hub.Mark()
	held := cfg
	held.Env = append(slices.Clip(cfg.Env), "PERF_ACK_HOLD=1")
	if _, err := r.RestartAgent(held); err != nil {
		t.Fatal(err)
	}
	restored, err := r.Hub.Wait(ctx, mark, "the restored clusters at the restarted stand-in", func(e perf.Event) bool {
		return e.Ev == "push" && e.Type == perf.ClusterType
	})
	if err != nil {
		t.Fatal(r.wrap(err))
	}
	if _, err := r.Hub.Wait(ctx, mark, "the stand-in holding its answer to the restored clusters", func(e perf.Event) bool {
		return e.Ev == "hold" && e.Type == perf.ClusterType
	}); err != nil {
		t.Fatal(r.wrap(err))
	}

	// Istiod, while down, dropped one cluster and changed every other one.
	const dropped = "outbound|80||svc-00000.ns.svc.cluster.local"
	next := perf.Clusters(n, size, "after-")
	delete(next, dropped)
	v2 := r.PushClusters(next)
	first := make(chan struct{})
	aw.mu.Lock()
	aw.armed, aw.first = true, first
	aw.mu.Unlock()
	back := time.Now()
	if err := r.ServeCP(0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first:
	case <-ctx.Done():
		t.Fatal(r.wrap(fmt.Errorf("Istiod sent no CDS response once back: %w", ctx.Err())))
	}
	firstAt := time.Since(back)
	// The stand-in has answered nothing since its restart: the restored response is unACKed.
	if unheld := r.Hub.Since(mark); slices.ContainsFunc(unheld, func(e perf.Event) bool { return e.Ev == "release" }) {
		t.Fatal("the stand-in answered before Istiod's first response: no ACK window")
	}
	stub, err := r.StubPid()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(stub, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	e, err := waitVersion(ctx, r, mark, v2)
	if err != nil {
		t.Fatal(err)
	}
	versions, resets := pushes(r, mark)
	aw.mu.Lock()
	replay, updated, removed := len(aw.replay), aw.updated, slices.Clone(aw.removed)
	replayDropped := slices.Contains(aw.replay, dropped)
	aw.mu.Unlock()
	var fails []string
	if restored.Version != v1 || restored.N != n {
		fails = append(fails, fmt.Sprintf("restored %s with %d clusters, want the snapshot's %s with %d", restored.Version, restored.N, v1, n))
	}
	if !slices.Contains(removed, dropped) {
		fails = append(fails, fmt.Sprintf("Istiod's first response removed %q, not the dropped cluster", removed))
	}
	if e.N != n-1 {
		fails = append(fails, fmt.Sprintf("the stand-in holds %d clusters at %s, want Istiod's %d (the dropped one removed)", e.N, v2, n-1))
	}
	for _, l := range r.Hub.Since(mark) { // and after every later response of Istiod's so far
		if l.Ev == "push" && l.Type == perf.ClusterType && l.Version != v1 && l.N != n-1 {
			fails = append(fails, fmt.Sprintf("the stand-in holds %d clusters at %s, want %d", l.N, l.Version, n-1))
		}
	}
	for _, v := range versions {
		if v < Version(v1) {
			fails = append(fails, fmt.Sprintf("version cds-%d, older than the snapshot's %s, reached the stand-in", v, v1))
			break
		}
	}
	if s := stale(versions); s > 0 {
		fails = append(fails, fmt.Sprintf("%d stale", s))
	}
	if resets > 0 {
		fails = append(fails, fmt.Sprintf("%d Envoy resets", resets))
	}
	w.add(t, row{"last_state_ack_window (WINGMAN_LAST_STATE on: Istiod back while the restarted Envoy has not ACKed the restored Delta CDS; Istiod dropped a cluster)",
		fmt.Sprintf("restored %s, %d clusters (%d B), unACKed; Istiod back with %s: the agent's replay named %d clusters (the dropped one: %v), Istiod's first CDS response %v after it was back: %d updated, removed %q; the stand-in, released: %s with %d clusters, versions %v, stale %d, Envoy resets %d",
			restored.Version, restored.N, restored.Bytes, v2, replay, replayDropped, firstAt.Round(time.Millisecond), updated, removed, e.Version, e.N, versions, stale(versions), resets),
		"the dropped cluster removed by Istiod's first response, the stand-in at Istiod's version with its 19 clusters, 0 resets, 0 stale", verdict(fails)})
	if len(fails) > 0 {
		logResets(t, r)
		t.Error(verdict(fails))
	}
}
