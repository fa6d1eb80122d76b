package meshlab

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	pb "istio.io/api/security/v1alpha1"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/ndspb"
)

// lab is a running meshlab for a test.
type lab struct {
	srv   *Server
	dir   string
	out   string
	addr  string
	loads chan LoadResult
}

func startLab(t *testing.T, files map[string]string) *lab {
	t.Helper()
	l := &lab{dir: t.TempDir(), out: t.TempDir(), loads: make(chan LoadResult, 16)}
	for name, data := range files {
		write(t, l.dir, name, data)
	}
	srv, err := New(Config{ResourcesDir: l.dir, OutputDir: l.out, CertTTL: time.Hour, Debounce: 20 * time.Millisecond,
		OnLoad: func(r LoadResult) { l.loads <- r }})
	if err != nil {
		t.Fatal(err)
	}
	if r := <-l.loads; r.Err != nil || r.Version != 1 {
		t.Fatalf("first load: %+v", r)
	}
	l.srv = srv
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l
}

// waitLoad waits for the next load result.
func (l *lab) waitLoad(t *testing.T) LoadResult {
	t.Helper()
	select {
	case r := <-l.loads:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no reload after a change to the resources folder")
		return LoadResult{}
	}
}

// dial connects as the agent does: TLS verified against the root file meshlab wrote, for
// ServerName, with the token file's content as the bearer token (token "" sends none).
func (l *lab) dial(t *testing.T, token string) *grpc.ClientConn {
	t.Helper()
	rootPEM, err := os.ReadFile(filepath.Join(l.out, RootCertPath))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(rootPEM) {
		t.Fatal("root-cert.pem holds no certificate")
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: ServerName}))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	cc, err := grpc.NewClient(l.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

func (l *lab) token(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(l.out, TokenPath))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var node = &core.Node{Id: "sidecar~10.0.0.1~app.demo~demo.svc.cluster.local"}

func clusterTimeouts(t *testing.T, anys [][]byte) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	for _, b := range anys {
		var c cluster.Cluster
		if err := proto.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		out[c.GetName()] = c.GetConnectTimeout().AsDuration()
	}
	return out
}

func TestServeReloadAndReject(t *testing.T) {
	l := startLab(t, map[string]string{"clusters.yaml": "kind: Cluster\nname: a\nconnect_timeout: 1s\n---\nkind: Cluster\nname: b\nconnect_timeout: 2s\n"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ads := discovery.NewAggregatedDiscoveryServiceClient(l.dial(t, l.token(t)))

	// State of the world: the folder's clusters.
	sotw, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sotw.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: fastpath.ClusterType}); err != nil {
		t.Fatal(err)
	}
	resp, err := sotw.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := clusterTimeouts(t, values(resp.GetResources())); len(got) != 2 || got["b"] != 2*time.Second {
		t.Fatalf("first response: %v", got)
	}
	ack := &discovery.DiscoveryRequest{TypeUrl: fastpath.ClusterType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
	if err := sotw.Send(ack); err != nil {
		t.Fatal(err)
	}

	// A change is reloaded and pushed.
	write(t, l.dir, "clusters.yaml", "kind: Cluster\nname: a\nconnect_timeout: 1s\n---\nkind: Cluster\nname: b\nconnect_timeout: 5s\n")
	if r := l.waitLoad(t); r.Err != nil || r.Version != 2 {
		t.Fatalf("reload: %+v", r)
	}
	resp, err = sotw.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := clusterTimeouts(t, values(resp.GetResources())); got["b"] != 5*time.Second {
		t.Fatalf("after the change: %v", got)
	}

	// A bad file is rejected, naming the file and the field; version 2 is still served.
	write(t, l.dir, "zz-bad.yaml", "kind: Cluster\nname: c\nconnect_timeout: 1s\nlb_policy: FASTEST\n")
	r := l.waitLoad(t)
	var fe *FileError
	if !errors.As(r.Err, &fe) || fe.File != filepath.Join(l.dir, "zz-bad.yaml") || fe.Field != "lb_policy" {
		t.Fatalf("bad file: got %+v, want a FileError for zz-bad.yaml field lb_policy", r)
	}
	if r.Version != 2 || l.srv.Version() != 2 || r.Counts != "Cluster=2" {
		t.Fatalf("after a rejected load: %+v, version %d", r, l.srv.Version())
	}
	delta, err := ads.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := delta.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: fastpath.ClusterType}); err != nil {
		t.Fatal(err)
	}
	dr, err := delta.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var anys [][]byte
	for _, res := range dr.GetResources() {
		anys = append(anys, res.GetResource().GetValue())
	}
	if got := clusterTimeouts(t, anys); len(got) != 2 || got["b"] != 5*time.Second {
		t.Fatalf("delta after the rejected file: %v, want the last good set", got)
	}

	// Removing the bad file makes the folder good again; a NameTable arrives with it.
	if err := os.Remove(filepath.Join(l.dir, "zz-bad.yaml")); err != nil {
		t.Fatal(err)
	}
	write(t, l.dir, "names.json", goodNames)
	for {
		r = l.waitLoad(t)
		if r.Err == nil && r.Counts == "Cluster=2 NameTable=1" {
			break
		}
	}
	if err := sotw.Send(&discovery.DiscoveryRequest{TypeUrl: fastpath.NameTableType}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err = sotw.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetTypeUrl() == fastpath.NameTableType {
			break
		}
	}
	var nt ndspb.NameTable
	if len(resp.GetResources()) != 1 || nt.UnmarshalVT(resp.GetResources()[0].GetValue()) != nil || len(nt.GetTable()) != 1 {
		t.Fatalf("name table: %v", resp)
	}
}

func values(anys []*anypb.Any) [][]byte {
	out := make([][]byte, len(anys))
	for i, a := range anys {
		out[i] = a.GetValue()
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i]) < string(out[j]) })
	return out
}

func TestServeRefusesBadToken(t *testing.T) {
	l := startLab(t, map[string]string{"c.yaml": "kind: Cluster\nname: a\n"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, tok := range []string{"", "wrong"} {
		ads := discovery.NewAggregatedDiscoveryServiceClient(l.dial(t, tok))
		s, err := ads.StreamAggregatedResources(ctx)
		if err == nil {
			_ = s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: fastpath.ClusterType})
			_, err = s.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("token %q: got %v, want Unauthenticated", tok, err)
		}
	}
}

func TestNewRejectsBadFolder(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "c.yaml", "kind: Cluster\nname: a\nconnect_timeout: never\n")
	_, err := New(Config{ResourcesDir: dir})
	var fe *FileError
	if !errors.As(err, &fe) || fe.Field != "connect_timeout" {
		t.Fatalf("got %v, want a FileError for field connect_timeout", err)
	}
}

func TestCA(t *testing.T) {
	l := startLab(t, map[string]string{"c.yaml": "kind: Cluster\nname: a\n"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	id := "spiffe://cluster.local/ns/demo/sa/echo"
	u, _ := url.Parse(id)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		t.Fatal(err)
	}
	req := &pb.IstioCertificateRequest{Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), ValidityDuration: 7200}

	_, err = pb.NewIstioCertificateServiceClient(l.dial(t, "wrong")).CreateCertificate(ctx, req)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: got %v, want Unauthenticated", err)
	}

	resp, err := pb.NewIstioCertificateServiceClient(l.dial(t, l.token(t))).CreateCertificate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	chain := resp.GetCertChain()
	if len(chain) != 2 {
		t.Fatalf("chain of %d elements, want leaf and root", len(chain))
	}
	leafBlock, _ := pem.Decode([]byte(chain[0]))
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != id {
		t.Errorf("leaf identity %v, want %s", leaf.URIs, id)
	}
	if ttl := leaf.NotAfter.Sub(leaf.NotBefore); ttl != time.Hour {
		t.Errorf("validity %v, want the CertTTL cap of 1h", ttl)
	}
	// The leaf chains to a root in the bundle the agent was given.
	bundle, _ := os.ReadFile(filepath.Join(l.out, RootCertPath))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("leaf does not chain to root-cert.pem: %v", err)
	}
	if md := l.srv.CA().LastMetadata(); len(md.Get("authorization")) != 1 {
		t.Errorf("CA saw metadata %v", md)
	}
}

// TestServeByAudience: "clients: grpc" resources go only to nodes with GENERATOR=grpc and
// "clients: envoy" ones only to the others, under the same names; the rest go to both.
func TestServeByAudience(t *testing.T) {
	l := startLab(t, map[string]string{"c.yaml": `kind: Cluster
name: shared
---
kind: Cluster
name: svc
clients: envoy
connect_timeout: 1s
---
kind: Cluster
name: svc
clients: grpc
connect_timeout: 2s
`})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ads := discovery.NewAggregatedDiscoveryServiceClient(l.dial(t, l.token(t)))
	grpcNode := &core.Node{Id: "sidecar~10.0.0.1~app.demo~demo.svc.cluster.local", Metadata: &structpb.Struct{
		Fields: map[string]*structpb.Value{"GENERATOR": structpb.NewStringValue("grpc")}}}
	for _, tc := range []struct {
		node *core.Node
		want time.Duration
	}{{node, time.Second}, {grpcNode, 2 * time.Second}} {
		s, err := ads.StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&discovery.DiscoveryRequest{Node: tc.node, TypeUrl: fastpath.ClusterType}); err != nil {
			t.Fatal(err)
		}
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got := clusterTimeouts(t, values(resp.GetResources()))
		if _, ok := got["shared"]; len(got) != 2 || !ok || got["svc"] != tc.want {
			t.Errorf("GENERATOR=%q got %v, want shared and svc with timeout %v", tc.node.GetMetadata().GetFields()["GENERATOR"].GetStringValue(), got, tc.want)
		}
	}
}

func TestAudienceErrors(t *testing.T) {
	_, err := ParseFile("a.yaml", []byte("kind: Cluster\nname: a\nclients: istio\n"))
	var fe *FileError
	if !errors.As(err, &fe) || fe.Field != "clients" {
		t.Errorf("bad clients value: got %v, want a FileError for field clients", err)
	}
	dir := t.TempDir()
	write(t, dir, "a.yaml", "kind: Cluster\nname: a\n---\nkind: Cluster\nname: a\nclients: grpc\n")
	if _, err := LoadDir(dir); !errors.As(err, &fe) || fe.Doc != 2 {
		t.Errorf("a name for all clients and again for grpc: got %v, want a duplicate error on document 2", err)
	}
}
