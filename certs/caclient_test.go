package certs

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/lab/testca"
)

// acceptCounter counts the connections a listener accepted.
type acceptCounter struct {
	net.Listener
	n atomic.Int32
}

func (l *acceptCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestCAClientConnectionPolicy runs the CA client against the real test CA over TLS: calls share
// one connection (warm's included), the CA sees the token, ClusterID, CA_HEADER_* and CertSigner,
// a failed sign drops the connection and the next sign dials afresh, and errors keep the CA's
// gRPC code.
func TestCAClientConnectionPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ca, err := testca.New(testca.Config{Token: "tok", TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &acceptCounter{Listener: l}
	served := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() { served <- ca.Serve(sctx, lis) }()
	defer func() { stop(); <-served }()

	dir := t.TempDir()
	write(t, filepath.Join(dir, "token"), "tok\n")
	write(t, filepath.Join(dir, "root.pem"), string(ca.ServingRootPEM()))
	cfg := Config{Namespace: "default", ServiceAccount: "sleep", KeyType: KeyECDSA,
		CAAddr:     net.JoinHostPort("localhost", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)),
		CARootPath: filepath.Join(dir, "root.pem"), TokenPath: filepath.Join(dir, "token"),
		ClusterID: "Kubernetes", CAHeaders: map[string]string{"x-ca": "1"}, CertSigner: "signer-x",
		CAAttempts: 1, Clock: newFakeClock(), Registerer: metric.NewRegistry()}
	cfg = cfg.withDefaults()
	c := newCAClient(&cfg, newMetrics(cfg.Registerer, func() map[string]float64 { return nil }))
	defer c.close()
	key, err := generateKey(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := createCSR(key.signer, testca.SpiffeID("cluster.local", "default", "sleep"))
	if err != nil {
		t.Fatal(err)
	}

	c.warm(ctx)
	for range 2 {
		chain, err := c.sign(ctx, csr)
		if err != nil || len(chain) != 2 {
			t.Fatalf("sign: %d elements, %v", len(chain), err)
		}
	}
	if n := lis.n.Load(); n != 1 {
		t.Fatalf("%d connections for a warm-up and two signs, want 1", n)
	}
	md := ca.LastMetadata()
	for k, want := range map[string]string{"authorization": "Bearer tok", "clusterid": "Kubernetes", "x-ca": "1"} {
		if got := md.Get(k); len(got) != 1 || got[0] != want {
			t.Errorf("CA saw %s=%q, want %q", k, got, want)
		}
	}
	if got := ca.LastRequestMetadata()[certSignerKey]; got != "signer-x" {
		t.Errorf("CA saw CertSigner %q", got)
	}

	ca.SetMode(testca.ModeUnavailable)
	if _, err := c.sign(ctx, csr); status.Code(err) != codes.Unavailable {
		t.Fatalf("sign against an unavailable CA: %v, want Unavailable", err)
	}
	ca.SetMode(testca.ModeOK)
	if _, err := c.sign(ctx, csr); err != nil {
		t.Fatal(err)
	}
	if n := lis.n.Load(); n != 2 {
		t.Fatalf("%d connections after a failed sign and a good one, want 2", n)
	}

	write(t, filepath.Join(dir, "token"), "wrong")
	if _, err := c.sign(ctx, csr); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("sign with a wrong token: %v, want Unauthenticated", err)
	}
}

// TestCAClientConnectTimeout: a CA that accepts the connection and never completes the TLS
// handshake fails the sign with Unavailable once the connect timeout has passed (grpc-go's
// connect timeout bounded it so before), and the held connection is dropped.
func TestCAClientConnectTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, silent
		}
	}()
	defer func() {
		l.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	dir := t.TempDir()
	ca, err := testca.New(testca.Config{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "root.pem"), string(ca.ServingRootPEM()))
	cfg := Config{Namespace: "default", ServiceAccount: "sleep", KeyType: KeyECDSA,
		CAAddr: l.Addr().String(), IstiodSAN: testca.ServerName, CARootPath: filepath.Join(dir, "root.pem"),
		CAAttempts: 1, Clock: newFakeClock(), Registerer: metric.NewRegistry()}
	cfg = cfg.withDefaults()
	c := newCAClient(&cfg, newMetrics(cfg.Registerer, func() map[string]float64 { return nil }))
	c.connectTimeout = 100 * time.Millisecond
	defer c.close()
	if _, err := c.sign(t.Context(), []byte("csr")); status.Code(err) != codes.Unavailable {
		t.Fatalf("sign against a silent CA: %v, want Unavailable", err)
	}
	c.mu.Lock()
	held := c.client
	c.mu.Unlock()
	if held != nil {
		t.Fatal("the connection was kept after a failed sign")
	}
}
