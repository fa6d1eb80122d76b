package h2grpc

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The peers of these tests are real: grpc-go servers and clients on real sockets, moving raw
// bytes through a CodecV2 that neither encodes nor decodes.

// rawCodec passes *[]byte through as the message bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "raw" }

const testMethod = "/test.Echo/Stream"

// pattern is size bytes that differ from message to message and within one.
func pattern(size, seed int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + seed + i>>10)
	}
	return b
}

// selfSigned makes a fresh ECDSA certificate for "localhost"/127.0.0.1 and a pool trusting it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	accepts atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepts.Add(1)
	}
	return c, err
}

// grpcPeer is a grpc-go server whose one handler does what the request metadata "x-mode" says.
type grpcPeer struct {
	srv  *grpc.Server
	lis  *countingListener
	addr string
	tls  *tls.Config // client config trusting the server; nil for plaintext
	done sync.WaitGroup

	// ended receives each handler's context error (nil if it ended by itself).
	ended chan error
	// headers receives each stream's metadata.
	headers chan metadata.MD
}

// Modes of grpcPeer's handler (metadata "x-mode"):
//   - "echo" (default): sends back every message; at the client's half-close ends with the
//     status in "x-code"/"x-msg" (default OK).
//   - "fail": ends at once with the status in "x-code"/"x-msg" (trailers-only).
//   - "send": sends one message of "x-size" bytes (pattern seed 1), then waits for the client
//     to half-close or go away.
//   - "wait": waits until the client goes away.
func startGRPCPeer(t testing.TB, useTLS bool) *grpcPeer {
	t.Helper()
	return startGRPCPeerAt(t, useTLS, "127.0.0.1:0")
}

func startGRPCPeerAt(t testing.TB, useTLS bool, addr string, extra ...grpc.ServerOption) *grpcPeer {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &grpcPeer{lis: &countingListener{Listener: l}, addr: l.Addr().String(), ended: make(chan error, 100), headers: make(chan metadata.MD, 100)}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.UnknownServiceHandler(p.handle),
		grpc.MaxRecvMsgSize(64 << 20),
		grpc.MaxSendMsgSize(64 << 20),
	}
	opts = append(opts, extra...)
	if useTLS {
		cert, pool := selfSigned(t)
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
		p.tls = &tls.Config{RootCAs: pool, ServerName: "localhost"}
	}
	p.srv = grpc.NewServer(opts...)
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		p.srv.Serve(p.lis)
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *grpcPeer) stop() {
	p.srv.Stop()
	p.done.Wait()
}

// report tells a test how a handler ended; dropped when nobody listens (the channel is full).
func (p *grpcPeer) report(err error) {
	select {
	case p.ended <- err:
	default:
	}
}

func (p *grpcPeer) handle(_ any, ss grpc.ServerStream) error {
	ctx := ss.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	select {
	case p.headers <- md:
	default:
	}
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	endStatus := func() error {
		code, _ := strconv.Atoi(first("x-code"))
		if code == 0 {
			return nil
		}
		msg := first("x-msg")
		if msg == "odd" {
			msg = oddMessage
		}
		return status.Error(codes.Code(code), msg)
	}
	switch first("x-mode") {
	case "fail":
		return endStatus()
	case "send":
		size, _ := strconv.Atoi(first("x-size"))
		msg := pattern(size, 1)
		if err := ss.SendMsg(&msg); err != nil {
			p.report(err)
			return err
		}
		var in []byte
		err := ss.RecvMsg(&in)
		p.report(ctx.Err())
		if err == io.EOF {
			return endStatus()
		}
		return err
	case "wait":
		<-ctx.Done()
		p.report(ctx.Err())
		return ctx.Err()
	}
	for {
		var in []byte
		err := ss.RecvMsg(&in)
		if err == io.EOF {
			p.report(nil)
			return endStatus()
		}
		if err != nil {
			p.report(ctx.Err())
			return err
		}
		if err := ss.SendMsg(&in); err != nil {
			p.report(ctx.Err())
			return err
		}
	}
}

// newTestClient makes a Client to p, closed at cleanup.
func newTestClient(t testing.TB, p *grpcPeer, hdr map[string]string) *Client {
	t.Helper()
	return newTestClientConfig(t, ClientConfig{Address: p.addr, TLS: p.tls, MaxRecvMsgBytes: 64 << 20}, hdr)
}

func newTestClientConfig(t testing.TB, cfg ClientConfig, hdr map[string]string) *Client {
	t.Helper()
	if hdr != nil {
		cfg.Header = func(context.Context) (http.Header, error) {
			h := http.Header{}
			for k, v := range hdr {
				h[k] = []string{v}
			}
			return h, nil
		}
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// recvAll reads the next whole message of s with reads of at most chunk bytes.
func recvAll(s *ClientStream, chunk int) ([]byte, error) {
	n, err := s.RecvMsgHeader()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, n)
	buf := make([]byte, chunk)
	for {
		m, err := s.Read(buf)
		out = append(out, buf[:m]...)
		if err == io.EOF {
			if len(out) != n {
				return out, fmt.Errorf("read %d bytes of a %d-byte message", len(out), n)
			}
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// grpcUnixClient is a grpc-go client of a Unix socket at path.
func grpcUnixClient(t testing.TB, path string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
	}, opts...)
	cc, err := grpc.NewClient("unix://"+path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

var bidi = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// startServer serves routes on a fresh Unix socket and stops at cleanup.
func startServer(t testing.TB, cfg ServerConfig, routes map[string]Handler) (*Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(t.Context(), cfg, routes)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, path
}

func bytesEqual(t testing.TB, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("got %d bytes, want %d; first difference at %d", len(got), len(want), i)
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
