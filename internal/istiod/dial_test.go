package istiod

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a real gRPC server (the health service: one unary and one streaming method)
// recording the metadata of every call.
type recorder struct {
	addr string
	mu   sync.Mutex
	mds  []metadata.MD
}

func serve(t *testing.T, creds grpc.ServerOption) *recorder {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: lis.Addr().String()}
	record := func(ctx context.Context) {
		md, _ := metadata.FromIncomingContext(ctx)
		r.mu.Lock()
		r.mds = append(r.mds, md)
		r.mu.Unlock()
	}
	opts := []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			record(ctx)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			record(ss.Context())
			return h(srv, ss)
		}),
	}
	if creds != nil {
		opts = append(opts, creds)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return r
}

func (r *recorder) last(t *testing.T) metadata.MD {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.mds) == 0 {
		t.Fatal("no call reached the server")
	}
	return r.mds[len(r.mds)-1]
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMetadataPerCall: the token is read on every call (a change is seen by the next call, a
// missing file sends no header), ClusterID and the caller's headers go on unary and streaming
// calls alike.
func TestMetadataPerCall(t *testing.T) {
	srv := serve(t, nil)
	tok := filepath.Join(t.TempDir(), "istio-token")
	writeFile(t, tok, "first\n")
	cc, err := Dial(Config{Address: srv.addr, Plaintext: true, TokenFile: tok, ClusterID: "Kubernetes",
		Metadata: map[string]string{"X-Custom": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx := t.Context()
	check := func(wantAuth string) {
		t.Helper()
		md := srv.last(t)
		if got := strings.Join(md.Get("authorization"), ","); got != wantAuth {
			t.Errorf("authorization %q, want %q", got, wantAuth)
		}
		if got := md.Get("clusterid"); len(got) != 1 || got[0] != "Kubernetes" {
			t.Errorf("ClusterID %q", got)
		}
		if got := md.Get("x-custom"); len(got) != 1 || got[0] != "v" {
			t.Errorf("X-Custom %q", got)
		}
	}

	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	check("Bearer first")

	writeFile(t, tok, "second")
	sctx, cancel := context.WithCancel(ctx)
	stream, err := client.Watch(sctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the server has run the handler: metadata recorded
		t.Fatal(err)
	}
	cancel()
	check("Bearer second")

	if err := os.Remove(tok); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	check("")
}

// pki is a CA and a serving certificate it signed for name.
func pki(t *testing.T, name string) (rootPEM string, serving tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
}

// handshake runs one client handshake with creds against a TLS server presenting serving.
func handshake(t *testing.T, creds credentials.TransportCredentials, serverName string, serving tls.Certificate) error {
	t.Helper()
	_, err := handshakeWith(t, creds, serverName, &tls.Config{Certificates: []tls.Certificate{serving}})
	return err
}

// handshakeWith runs one client handshake with creds against a TLS server configured by server
// and returns what the client negotiated.
func handshakeWith(t *testing.T, creds credentials.TransportCredentials, serverName string, server *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	server.NextProtos = []string{"h2"}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if c, err := lis.Accept(); err == nil {
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	defer func() { <-done }()
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn, info, err := creds.ClientHandshake(t.Context(), serverName, raw)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	conn.Close()
	return info.(credentials.TLSInfo).State, nil
}

// TestRootsReloaded: the roots are read again when their file changes, so a root rotation takes
// effect at the next handshake; a file being replaced (missing for a moment) keeps the last good
// roots; the server name is checked.
func TestRootsReloaded(t *testing.T) {
	oldRoot, _ := pki(t, "istiod.istio-system.svc")
	newRoot, serving := pki(t, "istiod.istio-system.svc")
	roots := filepath.Join(t.TempDir(), "root-cert.pem")
	writeFile(t, roots, oldRoot)
	cfg := Config{Address: "istiod.istio-system.svc:15012", RootCAFile: roots, ServerName: "istiod.istio-system.svc"}
	creds, err := transport(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, creds, cfg.ServerName, serving); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("handshake against untrusted roots: %v", err)
	}
	writeFile(t, roots, newRoot)
	if err := handshake(t, creds, cfg.ServerName, serving); err != nil {
		t.Fatalf("handshake after the roots changed: %v", err)
	}
	if err := os.Remove(roots); err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, creds, cfg.ServerName, serving); err != nil {
		t.Fatalf("handshake while the roots file is missing: %v", err)
	}
	wrongName := cfg
	wrongName.ServerName = "other.example.com"
	writeFile(t, roots, newRoot)
	other, err := transport(&wrongName)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, other, wrongName.ServerName, serving); err == nil {
		t.Fatal("a certificate for another name was accepted")
	}
	if _, err := transport(&Config{Address: cfg.Address, RootCAFile: filepath.Join(t.TempDir(), "missing.pem")}); err == nil {
		t.Fatal("unreadable roots accepted at dial")
	}
	if _, err := transport(&Config{Address: "istiod.istio-system.svc:15010", Plaintext: true, RootCAFile: "/missing"}); err != nil {
		t.Fatalf("a plaintext connection read the roots: %v", err)
	}
}
