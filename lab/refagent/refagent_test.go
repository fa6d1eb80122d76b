package refagent

import (
	"context"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// One downstream stream of each kind gets its own upstream connection, and responses are
// forwarded (decoded and re-encoded) with their version and resources.
func TestForwardsOverAConnectionPerStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	lc := cachev3.NewLinearCache(clusterType, cachev3.WithVersionPrefix("v"))
	lc.SetResources(map[string]types.Resource{"c1": &cluster.Cluster{Name: "c1"}})
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	srv := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, serverv3.NewServer(ctx, lc, nil))
	upDone := make(chan struct{})
	go func() { defer close(upDone); _ = srv.Serve(countingListener{up, &conns}) }()
	defer func() { srv.Stop(); <-upDone }()

	p, err := New(Config{Upstream: up.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "XDS")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- p.Serve(pctx, l) }()
	defer func() { stop(); <-served }()

	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := discovery.NewAggregatedDiscoveryServiceClient(cc)
	s, err := c.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: clusterType}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.VersionInfo != "v1" || len(resp.Resources) != 1 {
		t.Errorf("SotW response version %q with %d resources", resp.VersionInfo, len(resp.Resources))
	}
	d, err := c.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: clusterType}); err != nil {
		t.Fatal(err)
	}
	dresp, err := d.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Resources) != 1 || dresp.Resources[0].Name != "c1" {
		t.Errorf("Delta response %v", dresp.Resources)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d upstream connections for two streams, want 2", n)
	}
	// When the upstream goes away the downstream stream ends too, as with Istio's agent.
	srv.Stop()
	if _, err := s.Recv(); err == nil {
		t.Error("the SotW stream outlived its upstream")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("no upstream accepted")
	}
	if _, err := New(Config{Upstream: "x:1", RootCAFile: filepath.Join(t.TempDir(), "missing.pem")}); err == nil {
		t.Error("missing root file accepted")
	}
}
