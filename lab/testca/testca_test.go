package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func csrFor(t *testing.T, id string) (*ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(id)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// TestSignOverTLS runs the CA on a real TLS gRPC server and checks token, chain, TTL and modes.
func TestSignOverTLS(t *testing.T) {
	ca, err := New(Config{Token: "tok", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ca.cfg.TLS = true
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ca.Serve(t.Context(), lis) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.ServingRootPEM())
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(
		credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: ServerName})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewIstioCertificateServiceClient(conn)
	id := SpiffeID("cluster.local", "ns", "sa")
	key, csr := csrFor(t, id)
	req := &pb.IstioCertificateRequest{Csr: csr, ValidityDuration: 7200}

	if _, err := client.CreateCertificate(t.Context(), req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: got %v, want Unauthenticated", err)
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer tok", "ClusterID", "c1")
	resp, err := client.CreateCertificate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := ca.LastMetadata().Get("clusterid"); len(got) != 1 || got[0] != "c1" {
		t.Errorf("ClusterID metadata = %v", got)
	}
	if len(resp.CertChain) != 2 || resp.CertChain[1] != string(ca.RootPEM()) {
		t.Fatalf("chain has %d elements, want leaf + root", len(resp.CertChain))
	}
	b, _ := pem.Decode([]byte(resp.CertChain[0]))
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if leaf.URIs[0].String() != id || !key.PublicKey.Equal(leaf.PublicKey) {
		t.Errorf("leaf names %v with another key", leaf.URIs)
	}
	if ttl := leaf.NotAfter.Sub(leaf.NotBefore); ttl != time.Hour {
		t.Errorf("TTL %v, want the 1h cap", ttl)
	}

	for mode, want := range map[Mode]string{ModeGarbage: "not a certificate", ModeOneElement: "one"} {
		ca.SetMode(mode)
		resp, err := client.CreateCertificate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if mode == ModeOneElement && len(resp.CertChain) != 1 || mode == ModeGarbage && !strings.Contains(resp.CertChain[0], want) {
			t.Errorf("mode %d: chain %q", mode, resp.CertChain)
		}
	}
	ca.SetMode(ModeUnavailable)
	if _, err := client.CreateCertificate(ctx, req); status.Code(err) != codes.Unavailable {
		t.Errorf("ModeUnavailable: got %v", err)
	}
	if got := ca.Requests(); got != 5 {
		t.Errorf("Requests() = %d, want 5", got)
	}
	// A CSR without a SPIFFE URI is refused.
	ca.SetMode(ModeOK)
	_, bad := csrFor(t, "https://example.com")
	if _, err := client.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: bad}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("non-SPIFFE CSR: got %v", err)
	}
}
