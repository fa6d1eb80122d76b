package mux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/ndspb"
	"github.com/wingman-mesh/wingman/lab/framecodec"
)

// checkSotW asserts that a response holds exactly the cache's resources, byte for byte.
func checkSotW(t *testing.T, resp *discovery.DiscoveryResponse, want map[string]types.Resource) {
	t.Helper()
	if len(resp.Resources) != len(want) {
		t.Fatalf("%d resources, want %d", len(resp.Resources), len(want))
	}
	wantSet := map[string]bool{}
	for _, r := range want {
		wantSet[string(wantBytes(t, r))] = true
	}
	for _, a := range resp.Resources {
		if !wantSet[string(a.Value)] {
			t.Fatalf("resource of %d bytes is not byte-identical to any the server sent", len(a.Value))
		}
	}
}

func TestSotWLargeConfigsByteIdentical(t *testing.T) {
	i := newIstiod(t)
	_, sock := testProxy(t, i, nil)
	ctx := testCtx(t)
	ads := adsClient(t, sock)
	for _, size := range []int{100 << 10, 1 << 20, 10 << 20} {
		t.Run(fmt.Sprintf("size=%dKB", size>>10), func(t *testing.T) {
			want := clusters(1200, size, fmt.Sprint(size))
			i.caches[fastpath.ClusterType].SetResources(want)
			stream := subscribeClusters(t, ctx, ads)
			resp, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			checkSotW(t, resp, want)
			// ACK, then a change arrives on the same stream.
			if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: fastpath.ClusterType, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
				t.Fatal(err)
			}
			want2 := clusters(1200, size, "v2")
			i.caches[fastpath.ClusterType].SetResources(want2)
			resp, err = stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			checkSotW(t, resp, want2)
		})
	}
}

func TestDeltaLargeConfigByteIdentical(t *testing.T) {
	i := newIstiod(t)
	_, sock := testProxy(t, i, nil)
	ctx := testCtx(t)
	want := clusters(1500, 4<<20, "d")
	i.caches[fastpath.ClusterType].SetResources(want)
	stream, err := adsClient(t, sock).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType}); err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for len(got) < len(want) {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.Resources {
			got[r.Name] = r.Resource.Value
		}
		if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: fastpath.ClusterType, ResponseNonce: resp.Nonce}); err != nil {
			t.Fatal(err)
		}
	}
	for name, r := range want {
		if !bytes.Equal(got[name], wantBytes(t, r)) {
			t.Fatalf("%s is not byte-identical", name)
		}
	}
}

func TestAgentSubscriptionsAckAndNack(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			i := newIstiod(t)
			tables := make(chan *ndspb.NameTable, 4)
			var fail sync.Mutex
			failNext := false
			handler := func(res [][]byte) error {
				fail.Lock()
				defer fail.Unlock()
				if failNext {
					return errors.New("table rejected")
				}
				nt := &ndspb.NameTable{}
				if err := nt.UnmarshalVT(res[0]); err != nil {
					return err
				}
				tables <- nt
				return nil
			}
			_, sock := testProxy(t, i, func(c *Config) { c.AgentTypes = map[string]Handler{fastpath.NameTableType: handler} })
			ctx := testCtx(t)
			i.caches[fastpath.NameTableType].SetResources(map[string]types.Resource{"": nameTable("a.ns.svc.cluster.local")})
			i.caches[fastpath.ListenerType].SetResources(listeners(3))
			ads := adsClient(t, sock)
			send, recvType := typeStream(t, ctx, ads, delta)
			// No agent subscription before the first Listener request.
			if err := send(fastpath.ClusterType); err != nil {
				t.Fatal(err)
			}
			if err := send(fastpath.ListenerType); err != nil {
				t.Fatal(err)
			}
			select {
			case nt := <-tables:
				if _, ok := nt.Table["a.ns.svc.cluster.local"]; !ok {
					t.Fatalf("table %v", nt)
				}
			case <-ctx.Done():
				t.Fatal("no NameTable reached the handler")
			}
			isAck := func(typeURL, nonce string, nack bool, _ []string) bool {
				return typeURL == fastpath.NameTableType && nonce != "" && !nack
			}
			if err := i.waitRequest(ctx, isAck); err != nil {
				t.Fatal(err)
			}
			fail.Lock()
			failNext = true
			fail.Unlock()
			i.caches[fastpath.NameTableType].SetResources(map[string]types.Resource{"": nameTable("b.ns.svc.cluster.local")})
			isNack := func(typeURL, nonce string, nack bool, _ []string) bool {
				return typeURL == fastpath.NameTableType && nonce != "" && nack
			}
			if err := i.waitRequest(ctx, isNack); err != nil {
				t.Fatal(err)
			}
			// The client sees a Listener response (waited for: it may come late on a loaded
			// machine) but never a NameTable. Nothing marks the moment a forwarded NameTable
			// would have arrived, so the watch for one also lasts at least 200 ms: a slow
			// machine can only hide a fault here, never invent one.
			lookout := time.After(200 * time.Millisecond)
			sawLDS, looked := false, false
			for !sawLDS || !looked {
				select {
				case typ := <-recvType:
					if typ == fastpath.NameTableType {
						t.Fatal("NameTable was forwarded to the client")
					}
					sawLDS = sawLDS || typ == fastpath.ListenerType
				case <-lookout:
					looked = true
				case <-ctx.Done():
					t.Fatal("client got no Listener response")
				}
			}
		})
	}
}

func TestThreeDownstreamsShareOneUpstreamConnection(t *testing.T) {
	i := newIstiod(t)
	_, sock := testProxy(t, i, nil)
	ctx := testCtx(t)
	want := clusters(10, 10<<10, "s")
	i.caches[fastpath.ClusterType].SetResources(want)
	for k := range 3 {
		ads := adsClient(t, sock) // a separate client connection each, as separate Envoys
		if k == 2 {
			stream, err := ads.DeltaAggregatedResources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer stream.CloseSend()
			if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType}); err != nil {
				t.Fatal(err)
			}
			if r, err := stream.Recv(); err != nil || len(r.Resources) != len(want) {
				t.Fatalf("delta client: %v", err)
			}
			continue
		}
		stream := subscribeClusters(t, ctx, ads)
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		checkSotW(t, resp, want)
	}
	if n := i.Accepted(); n != 1 {
		t.Fatalf("Istiod accepted %d TCP connections for three streams, want 1", n)
	}
}

// cut reports whether a client's stream ended because the proxy lost Istiod in the middle of a
// response it was forwarding: Unavailable, or Internal where grpc-go saw the message cut short.
func cut(err error) bool {
	c := grpcstatus.Code(err)
	return c == codes.Unavailable || c == codes.Internal
}

// TestIstiodRestartMidPush stops Istiod while a client is subscribed, changes the config, and
// starts Istiod again: the client converges on the new config. Its stream stays open, unless
// the loss cut a response the proxy was forwarding while it arrived (cut-through): then it ends
// with Unavailable, as Istio's agent ends it on any upstream loss, and the client subscribes
// again as Envoy does, telling what it has.
func TestIstiodRestartMidPush(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			i := newIstiod(t)
			_, sock := testProxy(t, i, nil)
			ctx := testCtx(t)
			v1 := clusters(200, 200<<10, "v1")
			i.caches[fastpath.ClusterType].SetResources(v1)
			ads := adsClient(t, sock)
			state := map[string][]byte{}
			var recv func() error
			var ack func() error
			reopened := 0
			if delta {
				var stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
				open := func() error {
					var err error
					if stream, err = ads.DeltaAggregatedResources(ctx); err != nil {
						return err
					}
					have := map[string]string{}
					for n := range state {
						have[n] = "v" // any version: go-control-plane resends what differs
					}
					return stream.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType, InitialResourceVersions: have})
				}
				if err := open(); err != nil {
					t.Fatal(err)
				}
				defer func() { stream.CloseSend() }()
				var nonce string
				recv = func() error {
					r, err := stream.Recv()
					if cut(err) && reopened == 0 {
						reopened++
						if err := open(); err != nil {
							return err
						}
						r, err = stream.Recv()
					}
					if err != nil {
						return err
					}
					for _, res := range r.Resources {
						state[res.Name] = res.Resource.Value
					}
					for _, n := range r.RemovedResources {
						delete(state, n)
					}
					nonce = r.Nonce
					return nil
				}
				ack = func() error {
					return stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: fastpath.ClusterType, ResponseNonce: nonce})
				}
			} else {
				stream := subscribeClusters(t, ctx, ads)
				var last *discovery.DiscoveryResponse
				recv = func() error {
					r, err := stream.Recv()
					if cut(err) && reopened == 0 {
						reopened++
						stream = subscribeClusters(t, ctx, ads)
						r, err = stream.Recv()
					}
					if err != nil {
						return err
					}
					clear(state)
					for _, a := range r.Resources {
						var c cluster.Cluster
						if err := proto.Unmarshal(a.Value, &c); err != nil {
							return err
						}
						state[c.Name] = a.Value
					}
					last = r
					return nil
				}
				ack = func() error {
					return stream.Send(&discovery.DiscoveryRequest{TypeUrl: fastpath.ClusterType, VersionInfo: last.VersionInfo, ResponseNonce: last.Nonce})
				}
			}
			converged := func(want map[string]types.Resource) bool {
				if len(state) != len(want) {
					return false
				}
				for n, r := range want {
					if !bytes.Equal(state[n], wantBytes(t, r)) {
						return false
					}
				}
				return true
			}
			for !converged(v1) {
				if err := recv(); err != nil {
					t.Fatal(err)
				}
				if err := ack(); err != nil {
					t.Fatal(err)
				}
			}
			// A 2 MB push starts and Istiod goes away while it is on the wire.
			i.caches[fastpath.ClusterType].SetResources(clusters(200, 2<<20, "v1b"))
			i.stop()
			v2 := clusters(150, 150<<10, "v2") // 50 clusters removed, the rest changed
			i.caches[fastpath.ClusterType].SetResources(v2)
			i.start()
			for !converged(v2) {
				if err := recv(); err != nil {
					t.Fatalf("stream broke across the Istiod restart: %v", err)
				}
				if err := ack(); err != nil {
					t.Fatal(err)
				}
			}
			if n := i.Accepted(); n != 2 {
				t.Fatalf("%d upstream connections, want 2 (one before and one after the restart)", n)
			}
			// The replayed subscription told Istiod what the client already had.
			i.mu.Lock()
			defer i.mu.Unlock()
			replayed := false
			for _, r := range i.deltas {
				replayed = replayed || len(r.InitialResourceVersions) == len(v1) && r.Node.GetId() == testNode.Id
			}
			if reopened > 0 {
				t.Logf("the client's stream was cut with the response it was receiving, and re-opened")
				replayed = true // the client's own new subscription: nothing of the proxy's to check
			}
			for _, r := range i.requests {
				replayed = replayed || r.VersionInfo != "" && r.ResponseNonce == "" && r.Node.GetId() == testNode.Id
			}
			if !replayed {
				t.Fatal("no replayed request carried the node and the versions the client had")
			}
		})
	}
}

func TestCloseOnUpstreamLoss(t *testing.T) {
	i := newIstiod(t)
	_, sock := testProxy(t, i, func(c *Config) { c.CloseOnUpstreamLoss = true })
	ctx := testCtx(t)
	i.caches[fastpath.ClusterType].SetResources(clusters(3, 1<<10, "x"))
	stream := subscribeClusters(t, ctx, adsClient(t, sock))
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	i.stop()
	if _, err := stream.Recv(); err == nil {
		t.Fatal("stream stayed open after Istiod went away with CloseOnUpstreamLoss")
	}
}

func TestMalformedClientFrameEndsOnlyThatStream(t *testing.T) {
	i := newIstiod(t)
	_, sock := testProxy(t, i, nil)
	ctx := testCtx(t)
	i.caches[fastpath.ClusterType].SetResources(clusters(3, 1<<10, "x"))
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	raw, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, sotwMethod, grpc.ForceCodecV2(framecodec.Codec{}))
	if err != nil {
		t.Fatal(err)
	}
	bad := fastpath.FrameOf([]byte{0x22, 0x7f, 'x'}) // type_url claims 127 bytes, has 1
	if err := raw.SendMsg(&bad); err != nil {
		t.Fatal(err)
	}
	var f fastpath.Frame
	err = raw.RecvMsg(&f)
	if grpcstatus.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
	// The proxy still serves other streams.
	stream := subscribeClusters(t, ctx, adsClient(t, sock))
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
}

// TestSlowClientBoundedMemory has a client that subscribes and then stops reading while the
// upstream pushes 40 versions of 1 MB each without waiting for ACKs, as Istiod does: the proxy
// keeps at most one pending state-of-the-world response per type, so what it holds stays near
// one message whatever the number of pushes.
func TestSlowClientBoundedMemory(t *testing.T) {
	const pushes, size = 40, 1 << 20
	pushed := make(chan struct{})
	up := newRawUpstream(t, func(ss grpc.ServerStream) error {
		var f fastpath.Frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		f.Free()
		for v := range pushes {
			resp := encodeResponse(t, fastpath.ClusterType, fmt.Sprint(v), 100, size)
			if err := ss.SendMsg(&resp); err != nil {
				return err
			}
		}
		close(pushed)
		<-ss.Context().Done()
		return nil
	})
	p, sock := testProxy(t, nil, func(c *Config) { c.Upstream = UpstreamConfig{Address: up.addr, Plaintext: true} })
	ctx := testCtx(t)
	stream := subscribeClusters(t, ctx, adsClient(t, sock))
	select {
	case <-pushed: // every push left the upstream although the client reads nothing
	case <-ctx.Done():
		t.Fatal("upstream could not push: the proxy stopped reading from Istiod")
	}
	st := p.Stats()
	if st.PeakResponses > 2*size {
		t.Fatalf("proxy held %d bytes for one slow client, want <= 2 MB", st.PeakResponses)
	}
	// The client, reading again, gets the newest version last.
	var last string
	for last != fmt.Sprint(pushes-1) {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		last = r.VersionInfo
	}
}

// typeStream opens a SotW or Delta ADS stream on which every request carries the node. It returns
// a send function and the type URLs of the responses received. The reader goroutine ends with the
// stream; the test's cleanup closes the stream and waits for it.
func typeStream(t *testing.T, ctx context.Context, ads discovery.AggregatedDiscoveryServiceClient, delta bool) (func(string) error, <-chan string) {
	ctx, cancel := context.WithCancel(ctx)
	types := make(chan string, 64)
	var send func(string) error
	var recv func() (string, error)
	if delta {
		stream, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		send = func(typeURL string) error {
			return stream.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: typeURL})
		}
		recv = func() (string, error) { r, err := stream.Recv(); return r.GetTypeUrl(), err }
	} else {
		stream, err := ads.StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		send = func(typeURL string) error {
			return stream.Send(&discovery.DiscoveryRequest{Node: testNode, TypeUrl: typeURL})
		}
		recv = func() (string, error) { r, err := stream.Recv(); return r.GetTypeUrl(), err }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			typ, err := recv()
			if err != nil {
				return
			}
			select {
			case types <- typ:
			default: // the test reads only the first few; never block the reader
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return send, types
}

// subscribeClusters opens a SotW ADS stream and sends the first Cluster request, with the node,
// as Envoy does. The stream is half-closed when the test ends.
func subscribeClusters(t *testing.T, ctx context.Context, ads discovery.AggregatedDiscoveryServiceClient) discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
	t.Helper()
	stream, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.CloseSend() })
	if err := stream.Send(&discovery.DiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType}); err != nil {
		t.Fatal(err)
	}
	return stream
}
