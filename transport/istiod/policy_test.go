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
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"

	"github.com/wingman-mesh/wingman/transport/h2grpc"
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

// TestMetadataPerCall: through the policy's TLS config and stream header, an HTTP/2 gRPC client
// (transport/h2grpc, as the CA client and the xDS upstream use it) reaches a real grpc-go server
// over TLS and in plaintext; the token is read on every call (a change is seen by the next
// call, a missing file sends no header), ClusterID and the caller's headers go on unary and
// streaming calls alike.
func TestMetadataPerCall(t *testing.T) {
	for _, useTLS := range []bool{true, false} {
		t.Run(map[bool]string{true: "tls", false: "plaintext"}[useTLS], func(t *testing.T) {
			testMetadataPerCall(t, useTLS)
		})
	}
}

func testMetadataPerCall(t *testing.T, useTLS bool) {
	dir := t.TempDir()
	cfg := Config{Plaintext: !useTLS, TokenFile: filepath.Join(dir, "istio-token"), ClusterID: "Kubernetes",
		Metadata: map[string]string{"X-Custom": "v"}}
	var creds grpc.ServerOption
	if useTLS {
		rootPEM, serving := pki(t, "istiod.istio-system.svc")
		cfg.RootCAFile, cfg.ServerName = filepath.Join(dir, "root.pem"), "istiod.istio-system.svc"
		writeFile(t, cfg.RootCAFile, rootPEM)
		creds = grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serving}}))
	}
	srv := serve(t, creds)
	cfg.Address = srv.addr
	writeFile(t, cfg.TokenFile, "first\n")
	tc, err := TLSConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := h2grpc.NewClient(h2grpc.ClientConfig{Address: cfg.Address, TLS: tc, Header: StreamHeader(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
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

	if st, err := client.HealthCheck(ctx, ""); err != nil || st != h2grpc.HealthServing {
		t.Fatalf("Check: %v, %v", st, err)
	}
	check("Bearer first")

	writeFile(t, cfg.TokenFile, "second")
	stream, err := client.Open(ctx, "/grpc.health.v1.Health/Watch")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(mem.BufferSlice{}); err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()                                // a server-streaming method: grpc-go's handler waits for the half-close
	if _, err := stream.RecvMsgHeader(); err != nil { // the server has run the handler: metadata recorded
		t.Fatal(err)
	}
	stream.Close()
	check("Bearer second")

	if err := os.Remove(cfg.TokenFile); err != nil {
		t.Fatal(err)
	}
	if _, err := client.HealthCheck(ctx, ""); err != nil {
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

// handshake runs one client handshake with client against a TLS server presenting serving.
func handshake(t *testing.T, client *tls.Config, serving tls.Certificate) error {
	t.Helper()
	_, err := handshakeWith(t, client, &tls.Config{Certificates: []tls.Certificate{serving}})
	return err
}

// handshakeWith runs one client handshake with client against a TLS server configured by
// server and returns what the client negotiated.
func handshakeWith(t *testing.T, client *tls.Config, server *tls.Config) (tls.ConnectionState, error) {
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
	conn := tls.Client(raw, client)
	if err := conn.HandshakeContext(t.Context()); err != nil {
		return tls.ConnectionState{}, err
	}
	return conn.ConnectionState(), nil
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
	creds, err := TLSConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, creds, serving); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("handshake against untrusted roots: %v", err)
	}
	writeFile(t, roots, newRoot)
	if err := handshake(t, creds, serving); err != nil {
		t.Fatalf("handshake after the roots changed: %v", err)
	}
	if err := os.Remove(roots); err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, creds, serving); err != nil {
		t.Fatalf("handshake while the roots file is missing: %v", err)
	}
	wrongName := cfg
	wrongName.ServerName = "other.example.com"
	writeFile(t, roots, newRoot)
	other, err := TLSConfig(wrongName)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, other, serving); err == nil {
		t.Fatal("a certificate for another name was accepted")
	}
	if _, err := TLSConfig(Config{Address: cfg.Address, RootCAFile: filepath.Join(t.TempDir(), "missing.pem")}); err == nil {
		t.Fatal("unreadable roots accepted at dial")
	}
	if _, err := TLSConfig(Config{Address: "istiod.istio-system.svc:15010", Plaintext: true, RootCAFile: "/missing"}); err != nil {
		t.Fatalf("a plaintext connection read the roots: %v", err)
	}
}
