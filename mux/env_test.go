package mux

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/ndspb"
	"github.com/wingman-mesh/wingman/lab/controlplane"
)

const (
	testToken  = "test-token"
	istiodName = controlplane.ServerName
)

// pki is where the agent finds the roots that verify the Istiod stand-in.
type pki struct {
	rootFile string
}

// istiod is lab/controlplane, the Istiod stand-in (go-control-plane's real xDS server behind
// TLS, a bearer-token and a ClusterID check), serving Clusters, Listeners and NameTables from
// linear caches, with every request it received kept for the test.
type istiod struct {
	*controlplane.Server
	t      testing.TB
	pki    *pki
	addr   string // kept across stop and start
	caches map[string]*cachev3.LinearCache

	mu       sync.Mutex
	requests []*discovery.DiscoveryRequest // every SotW request received
	deltas   []*discovery.DeltaDiscoveryRequest
	reqSeen  chan struct{}
	// deltaGate, when set, is called with each Delta request after it is recorded, on the
	// stream's receiving goroutine: Istiod handles nothing more of that stream until it returns.
	deltaGate atomic.Pointer[func(*discovery.DeltaDiscoveryRequest)]
	sotwGate  atomic.Pointer[func(*discovery.DiscoveryRequest)]
	// read counts the requests read off the wire, before go-control-plane's stream loop (which
	// a gate may hold) takes them; readSeen is signalled at each.
	read     atomic.Int64
	readSeen chan struct{}
}

// readRequests counts each request a stream reads (controlplane.Config.StreamInterceptor).
func (i *istiod) readRequests(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, countedStream{ss, i})
}

type countedStream struct {
	grpc.ServerStream
	i *istiod
}

func (s countedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.i.read.Add(1)
		signal(s.i.readSeen)
	}
	return err
}

// waitRead waits until n requests in all have been read off the wire.
func (i *istiod) waitRead(ctx context.Context, n int64) error {
	for i.read.Load() < n {
		select {
		case <-i.readSeen:
		case <-ctx.Done():
			return fmt.Errorf("%d requests read at Istiod, want %d: %w", i.read.Load(), n, ctx.Err())
		}
	}
	return nil
}

func newIstiod(t testing.TB) *istiod {
	i := &istiod{t: t, reqSeen: make(chan struct{}, 1), readSeen: make(chan struct{}, 1), caches: map[string]*cachev3.LinearCache{}}
	types := []string{fastpath.ClusterType, fastpath.ListenerType, fastpath.NameTableType, fastpath.HealthInfoType, fastpath.ExtensionConfigType}
	cb := serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discovery.DiscoveryRequest) error {
			i.mu.Lock()
			i.requests = append(i.requests, proto.Clone(r).(*discovery.DiscoveryRequest))
			i.mu.Unlock()
			signal(i.reqSeen)
			if gate := i.sotwGate.Load(); gate != nil {
				(*gate)(r)
			}
			return nil
		},
		StreamDeltaRequestFunc: func(_ int64, r *discovery.DeltaDiscoveryRequest) error {
			i.mu.Lock()
			i.deltas = append(i.deltas, proto.Clone(r).(*discovery.DeltaDiscoveryRequest))
			i.mu.Unlock()
			signal(i.reqSeen)
			if gate := i.deltaGate.Load(); gate != nil {
				(*gate)(r) // may hold the stream's receiving until the test lets it go
			}
			return nil
		},
	}
	srv, err := controlplane.New(controlplane.Config{Token: testToken, Metadata: map[string]string{"ClusterID": "Kubernetes"},
		Types: types, Callbacks: cb, StreamInterceptor: i.readRequests})
	if err != nil {
		t.Fatal(err)
	}
	i.Server = srv
	for _, typ := range types {
		i.caches[typ] = srv.Cache(typ)
	}
	root := filepath.Join(t.TempDir(), "root-cert.pem")
	if err := os.WriteFile(root, srv.RootPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	i.pki = &pki{rootFile: root}
	i.addr = "127.0.0.1:0"
	i.start()
	i.addr = srv.Addr()
	t.Cleanup(i.stop)
	return i
}

// start serves again on the address of the first start.
func (i *istiod) start() {
	if err := i.Start(i.addr); err != nil {
		i.t.Fatal(err)
	}
}

// stop stops serving, closing every connection, as an Istiod going away.
func (i *istiod) stop() {
	if err := i.Stop(); err != nil {
		i.t.Error(err)
	}
}

// waitRequest waits until a received request (SotW or Delta, as a generic view) matches.
func (i *istiod) waitRequest(ctx context.Context, match func(typeURL, nonce string, nack bool, names []string) bool) error {
	for {
		i.mu.Lock()
		for _, r := range i.requests {
			if match(r.TypeUrl, r.ResponseNonce, r.ErrorDetail != nil, r.ResourceNames) {
				i.mu.Unlock()
				return nil
			}
		}
		for _, r := range i.deltas {
			if match(r.TypeUrl, r.ResponseNonce, r.ErrorDetail != nil, r.ResourceNamesSubscribe) {
				i.mu.Unlock()
				return nil
			}
		}
		i.mu.Unlock()
		select {
		case <-i.reqSeen:
		case <-ctx.Done():
			return fmt.Errorf("no matching request at Istiod: %w", ctx.Err())
		}
	}
}

// clusters builds n clusters totalling about size bytes.
func clusters(n, size int, version string) map[string]types.Resource {
	filler := strings.Repeat("x", max(size/n-40, 1))
	out := map[string]types.Resource{}
	for k := range n {
		name := fmt.Sprintf("outbound|80||svc-%04d.ns.svc.cluster.local", k)
		out[name] = &cluster.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Second),
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{ServiceName: version + filler}}
	}
	return out
}

func listeners(n int) map[string]types.Resource {
	out := map[string]types.Resource{}
	for k := range n {
		name := fmt.Sprintf("0.0.0.0_%d", 8000+k)
		out[name] = &listener.Listener{Name: name}
	}
	return out
}

// testProxy runs a Proxy against an istiod and returns its socket path.
func testProxy(t testing.TB, i *istiod, edit func(*Config)) (*Proxy, string) {
	t.Helper()
	dir := t.TempDir()
	tok := filepath.Join(dir, "istio-token")
	if err := os.WriteFile(tok, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		SocketPath: filepath.Join(dir, "etc/istio/proxy/XDS"),
		Backoff:    Backoff{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	}
	if i != nil {
		cfg.Upstream = UpstreamConfig{Address: i.addr, RootCAFile: i.pki.rootFile, ServerName: istiodName,
			TokenFile: tok, Metadata: map[string]string{"ClusterID": "Kubernetes"}}
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	l, err := Listen(cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	go func() { errc <- p.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	return p, cfg.SocketPath
}

// adsClient is a real gRPC ADS client over the proxy's socket.
func adsClient(t testing.TB, sock string) discovery.AggregatedDiscoveryServiceClient {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return discovery.NewAggregatedDiscoveryServiceClient(cc)
}

var testNode = &core.Node{Id: "sidecar~10.0.0.1~app-1.ns~ns.svc.cluster.local", Cluster: "app.ns"}

// wantBytes is how go-control-plane encodes a resource; forwarded bytes must be identical.
func wantBytes(t testing.TB, r types.Resource) []byte {
	b, err := cachev3.MarshalResource(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nameTable(hosts ...string) *ndspb.NameTable {
	nt := &ndspb.NameTable{Table: map[string]*ndspb.NameTable_NameInfo{}}
	for k, h := range hosts {
		nt.Table[h] = &ndspb.NameTable_NameInfo{Ips: []string{fmt.Sprintf("10.1.0.%d", k+1)}, Registry: "Kubernetes"}
	}
	return nt
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
