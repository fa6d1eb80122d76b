package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/wingman-mesh/wingman/lab/testca"
)

const clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = "tok"
	}
	if cfg.Types == nil {
		cfg.Types = []string{clusterType}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start runs s in the background on loopback until the test ends.
func start(t *testing.T, s *Server) {
	t.Helper()
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
}

// dialTLS connects as the agent does: TLS verified against RootPEM for ServerName.
func dialTLS(t *testing.T, s *Server) *grpc.ClientConn {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.RootPEM()) {
		t.Fatal("RootPEM holds no certificate")
	}
	cc, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: ServerName})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func withMD(ctx context.Context, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func setClusters(c interface {
	SetResources(map[string]types.Resource)
}, names ...string) {
	res := map[string]types.Resource{}
	for _, n := range names {
		res[n] = &cluster.Cluster{Name: n}
	}
	c.SetResources(res)
}

// fetch opens an ADS stream on cc, asks for Clusters as node and returns the first response.
func fetch(ctx context.Context, cc *grpc.ClientConn, node *core.Node) (*discovery.DiscoveryResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	// A refused stream fails Send with io.EOF; Recv has the status.
	if err := st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: clusterType}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return st.Recv()
}

func names(t *testing.T, r *discovery.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.GetResources() {
		var c cluster.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Name)
	}
	return out
}

func TestTokenAndMetadataChecked(t *testing.T) {
	s := newServer(t, Config{Metadata: map[string]string{"ClusterID": "Kubernetes"}})
	setClusters(s.Cache(clusterType), "a")
	start(t, s)
	cc := dialTLS(t, s)
	node := &core.Node{Id: "sidecar~1"}
	for _, tc := range []struct {
		name string
		md   []string
	}{
		{"no token", nil},
		{"wrong token", []string{"authorization", "Bearer nope", "ClusterID", "Kubernetes"}},
		{"no ClusterID", []string{"authorization", "Bearer tok"}},
		{"wrong ClusterID", []string{"authorization", "Bearer tok", "ClusterID", "other"}},
	} {
		if _, err := fetch(withMD(t.Context(), tc.md...), cc, node); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: got %v, want Unauthenticated", tc.name, err)
		}
	}
	r, err := fetch(withMD(t.Context(), "authorization", "Bearer tok", "ClusterID", "Kubernetes"), cc, node)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, r); len(got) != 1 || got[0] != "a" || r.VersionInfo != "1" {
		t.Errorf("got %v at version %q, want [a] at 1", got, r.VersionInfo)
	}
}

func TestVersionPrefixesAndPartitions(t *testing.T) {
	part := func(n *core.Node) string { return n.GetCluster() }
	s := newServer(t, Config{VersionPrefixes: true, Partitions: []string{"p", "q"}, Partition: part})
	setClusters(s.PartitionCache("p", clusterType), "for-p")
	setClusters(s.PartitionCache("q", clusterType), "for-q1")
	setClusters(s.PartitionCache("q", clusterType), "for-q2")
	if s.Cache(clusterType) != nil {
		t.Error("a partitioned server has a cache of partition \"\"")
	}
	start(t, s)
	cc := dialTLS(t, s)
	ctx := withMD(t.Context(), "authorization", "Bearer tok")
	for _, tc := range []struct{ partition, name, version string }{{"p", "for-p", "cds-1"}, {"q", "for-q2", "cds-2"}} {
		r, err := fetch(ctx, cc, &core.Node{Id: "n", Cluster: tc.partition})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(t, r); len(got) != 1 || got[0] != tc.name || r.VersionInfo != tc.version {
			t.Errorf("partition %s: got %v at %q, want [%s] at %s", tc.partition, got, r.VersionInfo, tc.name, tc.version)
		}
	}
}

func TestRestartKeepsAddressAndCountsConnections(t *testing.T) {
	s := newServer(t, Config{})
	setClusters(s.Cache(clusterType), "a")
	start(t, s)
	addr := s.Addr()
	cc := dialTLS(t, s)
	ctx := withMD(t.Context(), "authorization", "Bearer tok")
	if _, err := fetch(ctx, cc, &core.Node{Id: "n"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(t.Context(), 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("restarted on %s, want %s", s.Addr(), addr)
	}
	setClusters(s.Cache(clusterType), "b") // the caches outlive a restart
	r, err := fetch(ctx, cc, &core.Node{Id: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, r); len(got) != 1 || got[0] != "b" {
		t.Errorf("after the restart got %v, want [b]", got)
	}
	if n := s.Accepted(); n != 2 {
		t.Errorf("%d connections accepted, want 2 (one before and one after the restart)", n)
	}
	if err := s.Start(addr); err == nil {
		t.Error("a second Start while serving succeeded")
	}
}

func TestCAOnTheTLSPort(t *testing.T) {
	ca, err := testca.New(testca.Config{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Config{CA: ca})
	start(t, s)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(testca.SpiffeID("cluster.local", "ns", "sa"))
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	client := pb.NewIstioCertificateServiceClient(dialTLS(t, s))
	resp, err := client.CreateCertificate(withMD(t.Context(), "authorization", "Bearer tok"), &pb.IstioCertificateRequest{Csr: csr, ValidityDuration: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.CertChain) < 2 || ca.Requests() != 1 {
		t.Errorf("chain of %d, %d CA requests; want a leaf and a root from one request", len(resp.CertChain), ca.Requests())
	}
}

func TestPlaintextServesXDSWithoutToken(t *testing.T) {
	s := newServer(t, Config{})
	setClusters(s.Cache(clusterType), "a")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.ServePlaintext(ctx, l) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	r, err := fetch(t.Context(), cc, &core.Node{Id: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, r); len(got) != 1 || got[0] != "a" {
		t.Errorf("got %v, want [a]", got)
	}
	if s.Accepted() != 0 {
		t.Errorf("plaintext connections counted as TLS ones: %d", s.Accepted())
	}
}

func TestConfigRefused(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no token":                     {Types: []string{clusterType}},
		"no types":                     {Token: "t"},
		"partitions without Partition": {Token: "t", Types: []string{clusterType}, Partitions: []string{"a"}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestServeGracefulAndInterceptor: after ctx ends, ServeGraceful sends GOAWAY but lets an open
// stream go on (it still gets a push) until the grace is over, then closes it and returns; the
// StreamInterceptor sees every response sent.
func TestServeGracefulAndInterceptor(t *testing.T) {
	var sends atomic.Int32
	s := newServer(t, Config{StreamInterceptor: func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, countingStream{ss, &sends})
	}})
	setClusters(s.Cache(clusterType), "a")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.ServeGraceful(ctx, l, 2*time.Second) }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.RootPEM())
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: ServerName})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sctx, scancel := context.WithTimeout(withMD(t.Context(), "authorization", "Bearer tok"), 20*time.Second)
	defer scancel()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discovery.DiscoveryRequest{Node: &core.Node{Id: "n"}, TypeUrl: clusterType}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	cancel() // GOAWAY: the open stream continues for the grace
	if err := st.Send(&discovery.DiscoveryRequest{TypeUrl: clusterType, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}); err != nil {
		t.Fatal(err)
	}
	setClusters(s.Cache(clusterType), "b")
	if r, err = st.Recv(); err != nil {
		t.Fatalf("push during the grace: %v", err)
	}
	if got := names(t, r); len(got) != 1 || got[0] != "b" {
		t.Errorf("during the grace got %v, want [b]", got)
	}
	if _, err := st.Recv(); err == nil {
		t.Error("the stream outlived the grace")
	}
	if err := <-served; err != nil {
		t.Errorf("ServeGraceful: %v", err)
	}
	if n := sends.Load(); n != 2 {
		t.Errorf("the interceptor saw %d sends, want 2", n)
	}
}

type countingStream struct {
	grpc.ServerStream
	n *atomic.Int32
}

func (s countingStream) SendMsg(m any) error {
	s.n.Add(1)
	return s.ServerStream.SendMsg(m)
}
