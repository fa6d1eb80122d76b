package mux

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	udpa "github.com/cncf/xds/go/udpa/type/v1"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wingman-mesh/wingman/cache"
	"github.com/wingman-mesh/wingman/fastpath"
)

var testWasm = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x04, 0x03, 'm', 'u', 'x'}

// wasmServer serves modules over real HTTP; a path listed in gates waits for its channel.
type wasmServer struct {
	*httptest.Server
	hits    sync.Map // path → *atomic.Int32
	gates   map[string]chan struct{}
	arrived chan string // a request for a gated path came in
}

func newWasmServer(t testing.TB, gates map[string]chan struct{}) *wasmServer {
	s := &wasmServer{gates: gates, arrived: make(chan string, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := s.hits.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		if g := s.gates[r.URL.Path]; g != nil {
			s.arrived <- r.URL.Path
			select {
			case <-g:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write(append(bytes.Clone(testWasm), r.URL.Path...))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *wasmServer) count(path string) int32 {
	n, ok := s.hits.Load(path)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// wasmRewrite is the real module cache and ECDS rewrite, closed after the proxy stops.
func wasmRewrite(t testing.TB) Rewriter {
	c, err := cache.New(cache.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // registered before the proxy's cleanup: runs after it
	return cache.NewRewriter(c).Rewrite
}

func wasmPlugin(url string) *core.TypedExtensionConfig {
	w, _ := anypb.New(&httpwasm.Wasm{Config: &wasmv3.PluginConfig{Name: "p", Vm: &wasmv3.PluginConfig_VmConfig{VmConfig: &wasmv3.VmConfig{
		Runtime: "envoy.wasm.runtime.v8",
		Code: &core.AsyncDataSource{Specifier: &core.AsyncDataSource_Remote{Remote: &core.RemoteDataSource{
			HttpUri: &core.HttpUri{Uri: url, HttpUpstreamType: &core.HttpUri_Cluster{Cluster: "c"}}}}}}}}})
	return &core.TypedExtensionConfig{TypedConfig: w}
}

// localFile checks that a resource is the Wasm filter loading a file with the module served at path.
func localFile(t testing.TB, a *anypb.Any, path string) {
	t.Helper()
	ec := &core.TypedExtensionConfig{}
	w := &httpwasm.Wasm{}
	if err := a.UnmarshalTo(ec); err != nil {
		t.Fatal(err)
	}
	if err := ec.TypedConfig.UnmarshalTo(w); err != nil {
		t.Fatalf("%s: %v", ec.Name, err)
	}
	f := w.Config.GetVmConfig().GetCode().GetLocal().GetFilename()
	b, err := os.ReadFile(f)
	if err != nil || !bytes.Equal(b, append(bytes.Clone(testWasm), path...)) {
		t.Fatalf("%s: local file %q: %v", ec.Name, f, err)
	}
}

// TestECDSWasmThroughProxy: go-control-plane's server sends 20 WasmPlugins sharing one module
// and one non-Wasm resource to 10 streams at once. Every stream gets local files, the module is
// fetched once, the non-Wasm resource is byte-identical, and Istiod receives every stream's ACK.
func TestECDSWasmThroughProxy(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			i := newIstiod(t)
			mods := newWasmServer(t, nil)
			rw := wasmRewrite(t)
			_, sock := testProxy(t, i, func(c *Config) { c.Rewriters = map[string]Rewriter{fastpath.ExtensionConfigType: rw} })
			ctx := testCtx(t)
			res := map[string]types.Resource{}
			var names []string
			for k := range 20 {
				n := fmt.Sprintf("extensions.istio.io/wasmplugin/ns.p%02d", k)
				p := wasmPlugin(mods.URL + "/shared.wasm")
				p.Name = n
				res[n], names = p, append(names, n)
			}
			ts, _ := anypb.New(&udpa.TypedStruct{TypeUrl: "type.googleapis.com/other.Filter"})
			plain := &core.TypedExtensionConfig{Name: "plain", TypedConfig: ts}
			res["plain"], names = plain, append(names, "plain")
			i.caches[fastpath.ExtensionConfigType].SetResources(res)
			ads := adsClient(t, sock)
			var wg sync.WaitGroup
			nonces, acksSeen := make(chan string, 10), make(chan struct{})
			release := sync.OnceFunc(func() { close(acksSeen) })
			defer func() { release(); wg.Wait() }() // also when the test fails early
			for range 10 {
				wg.Go(func() {
					got, nonce := map[string]*anypb.Any{}, ""
					if delta {
						s, err := ads.DeltaAggregatedResources(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						defer s.CloseSend()
						if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: fastpath.ExtensionConfigType, ResourceNamesSubscribe: names}); err != nil {
							t.Error(err)
							return
						}
						for len(got) < len(names) {
							r, err := s.Recv()
							if err != nil {
								t.Error(err)
								return
							}
							for _, x := range r.Resources {
								got[x.Name] = x.Resource
							}
							nonce = r.Nonce
						}
						if err := s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: fastpath.ExtensionConfigType, ResponseNonce: nonce}); err != nil {
							t.Error(err)
						}
					} else {
						s, err := ads.StreamAggregatedResources(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						defer s.CloseSend()
						if err := s.Send(&discovery.DiscoveryRequest{Node: testNode, TypeUrl: fastpath.ExtensionConfigType, ResourceNames: names}); err != nil {
							t.Error(err)
							return
						}
						r, err := s.Recv()
						if err != nil {
							t.Error(err)
							return
						}
						for _, x := range r.Resources {
							ec := &core.TypedExtensionConfig{}
							_ = x.UnmarshalTo(ec)
							got[ec.Name] = x
						}
						nonce = r.Nonce
						if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: fastpath.ExtensionConfigType, ResourceNames: names, VersionInfo: r.VersionInfo, ResponseNonce: nonce}); err != nil {
							t.Error(err)
						}
					}
					for _, n := range names[:20] {
						localFile(t, got[n], "/shared.wasm")
					}
					if !bytes.Equal(got["plain"].Value, wantBytes(t, plain)) {
						t.Error("the non-Wasm ECDS resource changed in the proxy")
					}
					nonces <- nonce
					<-acksSeen // keep the stream open until Istiod has the ACK
				})
			}
			// One waiter at a time: waitRequest's wake-up signal is shared.
			for range 10 {
				var nonce string
				select {
				case nonce = <-nonces:
				case <-ctx.Done():
					t.Fatal("a stream got no ECDS response")
				}
				acked := func(typeURL, n string, nack bool, _ []string) bool {
					return typeURL == fastpath.ExtensionConfigType && n == nonce && !nack
				}
				if err := i.waitRequest(ctx, acked); err != nil {
					t.Error(err)
				}
			}
			release()
			wg.Wait()
			if n := mods.count("/shared.wasm"); n != 1 {
				t.Errorf("module fetched %d times for 10 streams x 20 plugins, want 1", n)
			}
		})
	}
}

// TestECDSOrderAndAcks scripts Istiod: a slow ECDS push, a Listener push, a newer ECDS push,
// then an ECDS response the rewrite cannot decode. The Listener response is not held up by the
// fetch; the newer ECDS supersedes the slow one (never delivered); the undecodable one is
// NACKed upstream with the last version the client accepted and never reaches the client.
func TestECDSOrderAndAcks(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	mods := newWasmServer(t, map[string]chan struct{}{"/slow.wasm": gate})
	ecds := func(version string, res ...*anypb.Any) fastpath.Frame {
		b, err := proto.Marshal(&discovery.DiscoveryResponse{VersionInfo: version, Nonce: "n" + version, TypeUrl: fastpath.ExtensionConfigType, Resources: res})
		if err != nil {
			t.Fatal(err)
		}
		return fastpath.FrameOf(b)
	}
	plugin := func(path string) *anypb.Any {
		p := wasmPlugin(mods.URL + path)
		p.Name = "wp"
		a, _ := anypb.New(p)
		return a
	}
	garbage := &anypb.Any{TypeUrl: fastpath.ExtensionConfigType, Value: []byte{0x12, 0x03, 0x0a, 0x01}}
	requests := make(chan *discovery.DiscoveryRequest, 64)
	var nack atomic.Pointer[discovery.DiscoveryRequest]
	up := newRawUpstream(t, func(ss grpc.ServerStream) error {
		recv := func() (*discovery.DiscoveryRequest, error) {
			var f fastpath.Frame
			if err := ss.RecvMsg(&f); err != nil {
				return nil, err
			}
			r := &discovery.DiscoveryRequest{}
			err := proto.Unmarshal(f.Data.Materialize(), r)
			f.Free()
			requests <- r
			return r, err
		}
		send := func(f fastpath.Frame) error { err := ss.SendMsg(&f); f.Free(); return err }
		until := func(match func(*discovery.DiscoveryRequest) bool) error {
			for {
				r, err := recv()
				if err != nil {
					return err
				}
				if match(r) {
					return nil
				}
			}
		}
		subscribed := map[string]bool{}
		if err := until(func(r *discovery.DiscoveryRequest) bool { subscribed[r.TypeUrl] = true; return len(subscribed) == 2 }); err != nil {
			return err
		}
		if err := send(ecds("1", plugin("/slow.wasm"))); err != nil {
			return err
		}
		<-mods.arrived // the fetch is under way (and will not finish): the Listener push must still pass
		for _, f := range []fastpath.Frame{encodeResponse(t, fastpath.ListenerType, "2", 1, 10), ecds("3", plugin("/fast.wasm"))} {
			if err := send(f); err != nil {
				return err
			}
		}
		if err := until(func(r *discovery.DiscoveryRequest) bool {
			return r.TypeUrl == fastpath.ExtensionConfigType && r.ResponseNonce == "n3" && r.ErrorDetail == nil
		}); err != nil {
			return err
		}
		if err := send(ecds("4", garbage)); err != nil {
			return err
		}
		if err := until(func(r *discovery.DiscoveryRequest) bool {
			if r.ResponseNonce == "n4" && r.ErrorDetail != nil {
				nack.Store(r)
				return true
			}
			return false
		}); err != nil {
			return err
		}
		if err := send(ecds("5", plugin("/fast.wasm"))); err != nil {
			return err
		}
		for {
			if _, err := recv(); err != nil {
				return nil
			}
		}
	})
	rw := wasmRewrite(t)
	_, sock := testProxy(t, nil, func(c *Config) {
		c.Upstream = UpstreamConfig{Address: up.addr, Plaintext: true}
		c.Rewriters = map[string]Rewriter{fastpath.ExtensionConfigType: rw}
	})
	ctx := testCtx(t)
	s, err := adsClient(t, sock).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseSend()
	for _, typ := range []string{fastpath.ExtensionConfigType, fastpath.ListenerType} {
		if err := s.Send(&discovery.DiscoveryRequest{Node: testNode, TypeUrl: typ, ResourceNames: []string{"wp"}}); err != nil {
			t.Fatal(err)
		}
	}
	var order []string
	for len(order) < 3 {
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, r.Nonce)
		switch r.Nonce {
		case "n3", "n5":
			localFile(t, r.Resources[0], "/fast.wasm")
		case "n2":
		default:
			t.Fatalf("client got %s (order so far %v)", r.Nonce, order)
		}
		if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce, ResourceNames: []string{"wp"}}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(order, ",") != "n2,n3,n5" {
		t.Fatalf("client got %v, want n2,n3,n5 (Listener first, slow ECDS superseded, garbage never)", order)
	}
	r := nack.Load()
	if r == nil || r.VersionInfo != "3" || r.ErrorDetail.Code != 13 || !strings.Contains(r.ErrorDetail.Message, "ECDS resource 0") {
		t.Errorf("agent's NACK = %v, want version 3, code Internal, detail naming the resource", r)
	}
	for {
		select {
		case r := <-requests:
			if r.ResponseNonce == "n1" {
				t.Errorf("Istiod got a request acknowledging n1, which the client never got: %v", r)
			}
			continue
		default:
		}
		break
	}
	if mods.count("/slow.wasm") != 1 {
		t.Errorf("slow module requested %d times", mods.count("/slow.wasm"))
	}
}

// TestECDSDeltaOrder: Delta ECDS responses are incremental, so none is superseded: a slow one
// holds the ones after it (of its type only: the Listener push passes), and they reach the
// client in Istiod's order.
func TestECDSDeltaOrder(t *testing.T) {
	gate := make(chan struct{})
	mods := newWasmServer(t, map[string]chan struct{}{"/slow.wasm": gate})
	released := false
	defer func() {
		if !released {
			close(gate)
		}
	}()
	resource := func(name, path string) *discovery.Resource {
		p := wasmPlugin(mods.URL + path)
		p.Name = name
		a, _ := anypb.New(p)
		return &discovery.Resource{Name: name, Version: "1", Resource: a}
	}
	encode := func(nonce, typeURL string, res ...*discovery.Resource) fastpath.Frame {
		b, err := proto.Marshal(&discovery.DeltaDiscoveryResponse{Nonce: nonce, TypeUrl: typeURL, Resources: res})
		if err != nil {
			t.Fatal(err)
		}
		return fastpath.FrameOf(b)
	}
	lds, _ := anypb.New(&discovery.DiscoveryRequest{}) // any payload: the proxy does not look
	up := newRawUpstream(t, func(ss grpc.ServerStream) error {
		seen := map[string]bool{}
		for len(seen) < 2 {
			var f fastpath.Frame
			if err := ss.RecvMsg(&f); err != nil {
				return err
			}
			r := &discovery.DeltaDiscoveryRequest{}
			_ = proto.Unmarshal(f.Data.Materialize(), r)
			f.Free()
			seen[r.TypeUrl] = true
		}
		send := func(f fastpath.Frame) error { err := ss.SendMsg(&f); f.Free(); return err }
		if err := send(encode("d1", fastpath.ExtensionConfigType, resource("a", "/slow.wasm"))); err != nil {
			return err
		}
		<-mods.arrived
		if err := send(encode("d2", fastpath.ListenerType, &discovery.Resource{Name: "l", Version: "1", Resource: lds})); err != nil {
			return err
		}
		if err := send(encode("d3", fastpath.ExtensionConfigType, resource("b", "/fast.wasm"))); err != nil {
			return err
		}
		for {
			var f fastpath.Frame
			if err := ss.RecvMsg(&f); err != nil {
				return nil
			}
			f.Free()
		}
	})
	rw := wasmRewrite(t)
	_, sock := testProxy(t, nil, func(c *Config) {
		c.Upstream = UpstreamConfig{Address: up.addr, Plaintext: true}
		c.Rewriters = map[string]Rewriter{fastpath.ExtensionConfigType: rw}
	})
	ctx := testCtx(t)
	s, err := adsClient(t, sock).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseSend()
	for _, typ := range []string{fastpath.ExtensionConfigType, fastpath.ListenerType} {
		if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r.Nonce != "d2" {
		t.Fatalf("first response %s, want the Listener push d2 (not held up by the ECDS fetch)", r.Nonce)
	}
	close(gate)
	released = true
	for _, want := range []struct{ nonce, name, path string }{{"d1", "a", "/slow.wasm"}, {"d3", "b", "/fast.wasm"}} {
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.Nonce != want.nonce || len(r.Resources) != 1 || r.Resources[0].Name != want.name {
			t.Fatalf("got %s %v, want %s with %s", r.Nonce, r.Resources, want.nonce, want.name)
		}
		localFile(t, r.Resources[0].Resource, want.path)
	}
}

// TestECDSPendingAcrossReconnect: a Delta ECDS response still being rewritten when its upstream
// stream is lost is dropped, its rewrite cancelled (the client never acknowledged it, so the
// replay has Istiod send it again); the new stream's response does not wait for the old fetch.
func TestECDSPendingAcrossReconnect(t *testing.T) {
	gate := make(chan struct{})
	mods := newWasmServer(t, map[string]chan struct{}{"/slow.wasm": gate})
	released := false
	defer func() {
		if !released {
			close(gate)
		}
	}()
	encode := func(nonce, path string) fastpath.Frame {
		p := wasmPlugin(mods.URL + path)
		p.Name = "a"
		a, _ := anypb.New(p)
		b, err := proto.Marshal(&discovery.DeltaDiscoveryResponse{Nonce: nonce, TypeUrl: fastpath.ExtensionConfigType,
			Resources: []*discovery.Resource{{Name: "a", Version: nonce, Resource: a}}})
		if err != nil {
			t.Fatal(err)
		}
		return fastpath.FrameOf(b)
	}
	var streams atomic.Int32
	up := newRawUpstream(t, func(ss grpc.ServerStream) error {
		var f fastpath.Frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		f.Free()
		if streams.Add(1) == 1 {
			first := encode("old", "/slow.wasm")
			err := ss.SendMsg(&first)
			first.Free()
			if err != nil {
				return err
			}
			<-mods.arrived
			return fmt.Errorf("stream lost") // while the module is still downloading
		}
		next := encode("new", "/fast.wasm")
		err := ss.SendMsg(&next)
		next.Free()
		if err != nil {
			return err
		}
		<-ss.Context().Done()
		return nil
	})
	rw := wasmRewrite(t)
	_, sock := testProxy(t, nil, func(c *Config) {
		c.Upstream = UpstreamConfig{Address: up.addr, Plaintext: true}
		c.Rewriters = map[string]Rewriter{fastpath.ExtensionConfigType: rw}
	})
	ctx := testCtx(t)
	s, err := adsClient(t, sock).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseSend()
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: fastpath.ExtensionConfigType, ResourceNamesSubscribe: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r.Nonce != "new" {
		t.Fatalf("client got %s first, want the new stream's response", r.Nonce)
	}
	localFile(t, r.Resources[0].Resource, "/fast.wasm")
	// rewriteLoop is sequential: "new" was forwarded only after the old response was dropped, so
	// the old one can no longer reach the client.
	close(gate)
	released = true
}

// TestECDSFetchDoesNotBlockOtherStreams: one stream's module download does not hold up another
// stream's ECDS response.
func TestECDSFetchDoesNotBlockOtherStreams(t *testing.T) {
	gate := make(chan struct{})
	mods := newWasmServer(t, map[string]chan struct{}{"/slow.wasm": gate})
	released := false
	defer func() {
		if !released {
			close(gate)
		}
	}()
	i := newIstiod(t)
	rw := wasmRewrite(t)
	_, sock := testProxy(t, i, func(c *Config) { c.Rewriters = map[string]Rewriter{fastpath.ExtensionConfigType: rw} })
	ctx := testCtx(t)
	slow, fast := wasmPlugin(mods.URL+"/slow.wasm"), wasmPlugin(mods.URL+"/fast.wasm")
	slow.Name, fast.Name = "slow", "fast"
	i.caches[fastpath.ExtensionConfigType].SetResources(map[string]types.Resource{"slow": slow, "fast": fast})
	ads := adsClient(t, sock)
	open := func(name string) discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
		s, err := ads.StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.CloseSend() })
		if err := s.Send(&discovery.DiscoveryRequest{Node: testNode, TypeUrl: fastpath.ExtensionConfigType, ResourceNames: []string{name}}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := open("slow")
	<-mods.arrived // stream a's fetch is under way and will not finish until released
	b := open("fast")
	r, err := b.Recv()
	if err != nil {
		t.Fatal(err)
	}
	localFile(t, r.Resources[0], "/fast.wasm")
	close(gate)
	released = true
	if r, err = a.Recv(); err != nil {
		t.Fatal(err)
	}
	localFile(t, r.Resources[0], "/slow.wasm")
}
