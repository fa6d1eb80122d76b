package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/clock/clocktest"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/lab/testca"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newFakeClock() *clocktest.Fake { return clocktest.NewFake(time.Now().Truncate(time.Second)) }

// waitForWaiter blocks until some goroutine waits on the clock.
func waitForWaiter(ctx context.Context, c *clocktest.Fake) error {
	if err := c.Wait(ctx, func(n int) bool { return n > 0 }); err != nil {
		return errors.New("no goroutine ever waited on the fake clock")
	}
	return nil
}

// logSink is a slog handler that hands records to the test.
type logSink struct{ ch chan slog.Record }

func (l logSink) Enabled(context.Context, slog.Level) bool { return true }
func (l logSink) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.ch <- r:
	default:
	}
	return nil
}
func (l logSink) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logSink) WithGroup(string) slog.Handler      { return l }

// env is a real CA over TLS gRPC, a Manager and an SDS Server on a Unix socket.
type env struct {
	t     testing.TB
	ctx   context.Context
	dir   string
	clock *clocktest.Fake
	ca    *testca.CA
	reg   *metric.Registry
	logs  chan slog.Record
	m     *Manager
	srv   *Server
}

func tempDir(t testing.TB) string {
	// Short: Unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "wm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newEnv(t testing.TB, mutate func(*Config)) *env {
	t.Helper()
	return newEnvWith(t, testca.ModeOK, mutate)
}

// newEnvWith starts the CA in mode, so even the first request sees it.
func newEnvWith(t testing.TB, mode testca.Mode, mutate func(*Config)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	e := &env{t: t, ctx: ctx, dir: tempDir(t), clock: newFakeClock(), reg: metric.NewRegistry(),
		logs: make(chan slog.Record, 256)}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	var err error
	e.ca, err = testca.New(testca.Config{Token: "secret-token", Clock: e.clock.Now, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	e.ca.SetMode(mode)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	run("ca", func(ctx context.Context) error { return e.ca.Serve(ctx, lis) })
	port := lis.Addr().(*net.TCPAddr).Port
	write(t, filepath.Join(e.dir, "token"), "secret-token\n")
	write(t, filepath.Join(e.dir, "ca-root.pem"), string(e.ca.ServingRootPEM()))
	cfg := Config{
		Namespace: "default", ServiceAccount: "sleep",
		KeyType:       KeyECDSA,
		CAAddr:        net.JoinHostPort("localhost", strconv.Itoa(port)),
		CARootPath:    filepath.Join(e.dir, "ca-root.pem"),
		TokenPath:     filepath.Join(e.dir, "token"),
		ClusterID:     "Kubernetes",
		CAHeaders:     map[string]string{"x-wingman": "yes"},
		SDSSocketPath: filepath.Join(e.dir, "sds.sock"),
		CAAttempts:    1,
		Clock:         e.clock,
		Logger:        slog.New(logSink{e.logs}),
		Registerer:    e.reg,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	e.m, err = NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = NewServer(e.m)
	run("sds", e.srv.Run)
	run("manager", e.m.Run)
	select {
	case <-e.srv.Serving():
	case <-ctx.Done():
		t.Fatal("SDS never served")
	}
	return e
}

func write(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// counter reads a counter of the env's registry by full name.
// counter reads the first series of the family name, whatever its labels, from the text the
// registry exports.
func (e *env) counter(name string) float64 {
	var b strings.Builder
	if err := e.reg.WriteText(&b); err != nil {
		e.t.Fatal(err)
	}
	for line := range strings.SplitSeq(b.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
			if err != nil {
				e.t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// rotate moves the fake clock, once the manager waits on it, to the current certificate's
// rotation time, or past the longest retry backoff when that time has passed already.
func (e *env) rotate() {
	e.t.Helper()
	if err := waitForWaiter(e.ctx, e.clock); err != nil {
		e.t.Fatal(err)
	}
	at := e.m.cur.Load().rotateAt
	if now := e.clock.Now(); !at.After(now) {
		at = now.Add(2 * e.m.cfg.RetryMax)
	}
	e.clock.Set(at)
}

// sdsClient is an Envoy-like SDS client over the Unix socket.
type sdsClient struct {
	t      testing.TB
	conn   *grpc.ClientConn
	stream secretv3.SecretDiscoveryService_StreamSecretsClient
	nonce  string
}

func (e *env) dial() *sdsClient {
	e.t.Helper()
	conn, err := grpc.NewClient("unix://"+e.srv.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	stream, err := secretv3.NewSecretDiscoveryServiceClient(conn).StreamSecrets(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return &sdsClient{t: e.t, conn: conn, stream: stream}
}

func (c *sdsClient) send(nonce string, names ...string) {
	c.t.Helper()
	err := c.stream.Send(&discovery.DiscoveryRequest{
		Node:    &corev3.Node{Id: "sidecar~10.0.0.1~sleep.default~default.svc.cluster.local"},
		TypeUrl: fastpath.SecretType, ResourceNames: names, ResponseNonce: nonce,
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// recv returns the next response's secrets by name, and ACKs it.
func (c *sdsClient) recv(ack ...string) (map[string]*tlsv3.Secret, error) {
	resp, err := c.stream.Recv()
	if err != nil {
		return nil, err
	}
	out := map[string]*tlsv3.Secret{}
	for _, a := range resp.GetResources() {
		s := &tlsv3.Secret{}
		if err := proto.Unmarshal(a.GetValue(), s); err != nil {
			return nil, err
		}
		out[s.GetName()] = s
	}
	c.nonce = resp.GetNonce()
	if ack != nil {
		c.send(resp.GetNonce(), ack...)
	}
	return out, nil
}

func (c *sdsClient) mustRecv(ack ...string) map[string]*tlsv3.Secret {
	c.t.Helper()
	out, err := c.recv(ack...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// checkPair verifies that sec holds a matching key and chain for the expected identity, valid at
// now and chaining to rootPEM; it returns the leaf.
func checkPair(sec *tlsv3.Secret, now time.Time, rootPEM []byte) (*x509.Certificate, error) {
	tc := sec.GetTlsCertificate()
	if tc == nil {
		return nil, errors.New("secret holds no tls_certificate")
	}
	kp, err := tls.X509KeyPair(tc.GetCertificateChain().GetInlineBytes(), tc.GetPrivateKey().GetInlineBytes())
	if err != nil {
		return nil, err
	}
	if !now.Before(kp.Leaf.NotAfter) || now.Before(kp.Leaf.NotBefore) {
		return nil, errors.New("certificate not valid at " + now.String())
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	if _, err := kp.Leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, err
	}
	if got := kp.Leaf.URIs[0].String(); got != "spiffe://cluster.local/ns/default/sa/sleep" {
		return nil, errors.New("wrong identity " + got)
	}
	return kp.Leaf, nil
}
