package mux

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wingman-mesh/wingman/fastpath"
)

// A slow Envoy costs nothing upstream (issue 16, item 4). The scenario: Envoy stops
// reading its ADS stream for 10 s while Istiod pushes 5 MB every 200 ms. CI runs it scaled down
// (1 MB every 20 ms for 2 s, 100 pushes; 256 KiB under the race detector); WINGMAN_SLOW_ENVOY=full runs the figures.
//
// The client is a real gRPC ADS client with static 64 KiB HTTP/2 windows that stops calling
// Recv: its transport takes 64 KiB and then no more, as a stalled Envoy. Measured:
//   - the longest Istiod's SendMsg blocked;
//   - the live heap after a collection at the end of the stall, above the same at idle (the whole
//     test process: the fake Istiod's unsent data counts too);
//   - responses delivered after the stall that a later one had already superseded (sent by
//     Istiod before the client read again), and the final state and ACK Istiod sees.

type slowScenario struct {
	size     int
	interval time.Duration
	pushes   int
}

func scenarioFromEnv() slowScenario {
	if os.Getenv("WINGMAN_SLOW_ENVOY") == "full" {
		return slowScenario{size: 5 << 20, interval: 200 * time.Millisecond, pushes: 50}
	}
	if raceEnabled { // the race detector slows the proxy itself below 50 MB/s on a shared machine
		return slowScenario{size: 256 << 10, interval: 20 * time.Millisecond, pushes: 100}
	}
	return slowScenario{size: 1 << 20, interval: 20 * time.Millisecond, pushes: 100}
}

type slowResult struct {
	maxBlock   time.Duration
	heldBytes  int64
	superseded int
	merged     int
}

func TestSlowEnvoySotW(t *testing.T)  { checkSlow(t, runSlow(t, scenarioFromEnv(), false)) }
func TestSlowEnvoyDelta(t *testing.T) { checkSlow(t, runSlow(t, scenarioFromEnv(), true)) }

func checkSlow(t *testing.T, r slowResult) {
	sc := scenarioFromEnv()
	// The bar is 1 s in a 10 s stall: a measure of speed, gated only in the issue's
	// own run (WINGMAN_SLOW_ENVOY=full, on a machine given to it). In every run, that each push
	// left Istiod while the client read nothing is the check (runSlow), and maxBlock is logged.
	if os.Getenv("WINGMAN_SLOW_ENVOY") == "full" {
		if stall := time.Duration(sc.pushes) * sc.interval; r.maxBlock > stall/10 {
			t.Errorf("Istiod's send blocked %v, want <= %v", r.maxBlock, stall/10)
		}
	}
	// In flight to the client, one pending (merged) response, one being received, and Istiod's own.
	if limit := int64(6 * sc.size); r.heldBytes > limit {
		t.Errorf("held %d bytes above idle during the stall, want <= %d", r.heldBytes, limit)
	}
	// The one response already on its way to the client when it stopped reading is delivered.
	if r.superseded > 1 {
		t.Errorf("%d superseded responses delivered, want <= 1", r.superseded)
	}
}

func runSlow(t *testing.T, sc slowScenario, delta bool) slowResult {
	ctx := testCtx(t)
	typeURL := fastpath.ClusterType
	const resources = 50
	start := make(chan struct{})  // the client has stopped reading
	pushed := make(chan struct{}) // every push has left Istiod
	var mu sync.Mutex
	var maxBlock time.Duration
	var lastAck string
	acked := make(chan struct{}, 1)
	up := newRawUpstream(t, func(ss grpc.ServerStream) error {
		var f fastpath.Frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		f.Free()
		go func() { // ACKs, as Istiod reads them
			var p fastpath.Peeker
			for {
				var f fastpath.Frame
				if err := ss.RecvMsg(&f); err != nil {
					return
				}
				var nonce string
				var nack bool
				if delta {
					var r fastpath.DeltaRequest
					if p.PeekDeltaRequest(f.Data, &r, nil) == nil {
						nonce, nack = r.Nonce, r.HasError
					}
				} else {
					var r fastpath.Request
					if p.PeekRequest(f.Data, &r) == nil {
						nonce, nack = r.Nonce, r.HasError
					}
				}
				f.Free()
				if nonce != "" && !nack {
					mu.Lock()
					lastAck = nonce
					mu.Unlock()
					signal(acked)
				}
			}
		}()
		send := func(v int) error {
			resp := slowPush(t, typeURL, v, resources, sc.size, delta)
			t0 := time.Now()
			err := ss.SendMsg(&resp)
			mu.Lock()
			maxBlock = max(maxBlock, time.Since(t0))
			mu.Unlock()
			return err
		}
		if err := send(0); err != nil {
			return nil
		}
		select {
		case <-start:
		case <-ss.Context().Done():
			return nil
		}
		tick := time.NewTicker(sc.interval)
		defer tick.Stop()
		for v := 1; v <= sc.pushes; v++ {
			if err := send(v); err != nil {
				return nil
			}
			select {
			case <-tick.C:
			case <-ss.Context().Done():
				return nil
			}
		}
		close(pushed)
		<-ss.Context().Done()
		return nil
	})
	p, sock := testProxy(t, nil, func(c *Config) { c.Upstream = UpstreamConfig{Address: up.addr, Plaintext: true} })
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ads := discovery.NewAggregatedDiscoveryServiceClient(cc)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &slowClient{t: t, delta: delta, state: map[string]string{}}
	if delta {
		if c.ds, err = ads.DeltaAggregatedResources(sctx); err == nil {
			err = c.ds.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: typeURL})
		}
	} else {
		if c.ss, err = ads.StreamAggregatedResources(sctx); err == nil {
			err = c.ss.Send(&discovery.DiscoveryRequest{Node: testNode, TypeUrl: typeURL})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if v := c.recvAndAck(); v != 0 {
		t.Fatalf("first version %d, want 0", v)
	}
	idle := liveHeap()
	close(start) // the client reads nothing from now on
	// Every push leaves Istiod although the client reads nothing: a proxy that passed the
	// client's stall upstream would hold Istiod's sends in HTTP/2 flow control for good.
	select {
	case <-pushed:
	case <-ctx.Done():
		t.Fatalf("Istiod could not send its %d pushes while the client read nothing: the stall reached upstream", sc.pushes)
	}
	// And the proxy has read every push: push 1 went on its way to the client, pushes 2..n
	// collapsed into one pending response (on a loaded machine the proxy may lag Istiod).
	// Polled, as Stats has no signal, until the test's deadline.
	for p.Stats().SupersededResponses < sc.pushes-2 {
		select {
		case <-ctx.Done():
			t.Fatalf("the proxy superseded %d of the %d pushes behind the one in flight, want all of them", p.Stats().SupersededResponses, sc.pushes-2)
		case <-time.After(sc.interval):
		}
	}
	held := liveHeap() - idle
	var res slowResult
	res.merged = p.Stats().SupersededResponses
	for v := -1; v != sc.pushes; {
		nv := c.recvAndAck()
		if nv < v {
			t.Fatalf("version %d after %d", nv, v)
		}
		v = nv
		if v < sc.pushes {
			res.superseded++
		}
	}
	// What Istiod learns: the client's ACK of the newest nonce it sent.
	final := fmt.Sprint("n", sc.pushes)
	for {
		mu.Lock()
		got := lastAck
		mu.Unlock()
		if got == final {
			break
		}
		select {
		case <-acked:
		case <-ctx.Done():
			t.Fatalf("Istiod's last ACK is %q, want %q", got, final)
		}
	}
	if delta { // every resource at the newest version, and the removal kept
		if len(c.state) != resources {
			t.Fatalf("client holds %d resources, want %d: %v", len(c.state), resources, c.state)
		}
		for name, v := range c.state {
			if v != fmt.Sprint(sc.pushes) {
				t.Fatalf("client holds %s at version %s, want %d", name, v, sc.pushes)
			}
		}
	}
	mu.Lock()
	res.maxBlock = maxBlock
	mu.Unlock()
	res.heldBytes = held
	t.Logf("delta=%v %d x %d KiB every %v: Istiod's send blocked at most %v; held %.1f MiB above idle; %d superseded delivered; %d superseded in the queue",
		delta, sc.pushes, sc.size>>10, sc.interval, res.maxBlock.Round(time.Millisecond), float64(held)/(1<<20), res.superseded, res.merged)
	c.close()
	return res
}

// slowPush is push v: resources res-0..n-1 at version v; Delta push 0 also carries "extra",
// which push 1 removes.
func slowPush(t testing.TB, typeURL string, v, n, size int, delta bool) fastpath.Frame {
	version := fmt.Sprint(v)
	body := []byte(strings.Repeat("r", max(size/n-24, 1)))
	var m proto.Message
	if delta {
		r := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: version, TypeUrl: typeURL, Nonce: "n" + version}
		for k := range n {
			r.Resources = append(r.Resources, &discovery.Resource{Name: fmt.Sprint("res-", k), Version: version,
				Resource: &anypb.Any{TypeUrl: typeURL, Value: body}})
		}
		switch v {
		case 0:
			r.Resources = append(r.Resources, &discovery.Resource{Name: "extra", Version: version, Resource: &anypb.Any{TypeUrl: typeURL}})
		case 1:
			r.RemovedResources = []string{"extra"}
		}
		m = r
	} else {
		r := &discovery.DiscoveryResponse{VersionInfo: version, TypeUrl: typeURL, Nonce: "n" + version}
		for range n {
			r.Resources = append(r.Resources, &anypb.Any{TypeUrl: typeURL, Value: body})
		}
		m = r
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return fastpath.FrameOf(b)
}

// slowClient is the Envoy side: it applies what it receives and ACKs it.
type slowClient struct {
	t     *testing.T
	delta bool
	ss    discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	ds    discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	state map[string]string // Delta: resource name → version
}

// recvAndAck reads one response, applies and ACKs it, and returns its version.
func (c *slowClient) recvAndAck() int {
	var version, nonce string
	if c.delta {
		r, err := c.ds.Recv()
		if err != nil {
			c.t.Fatal(err)
		}
		for _, res := range r.Resources {
			c.state[res.Name] = res.Version
		}
		for _, n := range r.RemovedResources {
			delete(c.state, n)
		}
		version, nonce = r.SystemVersionInfo, r.Nonce
		err = c.ds.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: nonce})
		if err != nil {
			c.t.Fatal(err)
		}
	} else {
		r, err := c.ss.Recv()
		if err != nil {
			c.t.Fatal(err)
		}
		version, nonce = r.VersionInfo, r.Nonce
		if err := c.ss.Send(&discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: version, ResponseNonce: nonce}); err != nil {
			c.t.Fatal(err)
		}
	}
	var v int
	if _, err := fmt.Sscan(version, &v); err != nil {
		c.t.Fatalf("version %q: %v", version, err)
	}
	return v
}

func (c *slowClient) close() {
	if c.delta {
		_ = c.ds.CloseSend()
	} else {
		_ = c.ss.CloseSend()
	}
}

// liveHeap is the live heap after full collections: two, so that buffers returned to
// sync.Pools (which survive one collection in the victim cache) are not counted as held.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
