package h2grpc

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

func sendBytes(s *ClientStream, b []byte) error {
	return s.SendMsg(mem.BufferSlice{mem.SliceBuffer(b)})
}

var echoSizes = []int{0, 1, 5, 1000, 16384, 64<<10 + 3, 1 << 20, 10 << 20}

func TestClientEchoSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"tls", true}, {"plaintext", false}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startGRPCPeer(t, tc.tls)
			c := newTestClient(t, p, nil)
			s, err := c.Open(testCtx(t), testMethod)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i, size := range echoSizes {
				want := pattern(size, i)
				// Sent in several buffers, so a message crosses buffer boundaries.
				third := size / 3
				msg := mem.BufferSlice{mem.SliceBuffer(want[:third]), mem.SliceBuffer(want[third : 2*third]), mem.SliceBuffer(want[2*third:])}
				if err := s.SendMsg(msg); err != nil {
					t.Fatalf("SendMsg %d bytes: %v", size, err)
				}
				got, err := recvAll(s, 7777)
				if err != nil {
					t.Fatalf("receive %d bytes: %v", size, err)
				}
				bytesEqual(t, got, want)
			}
			s.CloseSend()
			if _, err := s.RecvMsgHeader(); err != io.EOF {
				t.Fatalf("after CloseSend: %v, want io.EOF", err)
			}
			if got := p.lis.accepts.Load(); got != 1 {
				t.Fatalf("%d connections, want 1", got)
			}
		})
	}
}

// oddMessage has every kind of byte the percent-encoding must carry: '%', non-ASCII, control
// characters, and text that looks like an escape already.
const oddMessage = "héllo wörld ☃ 100% sure %41 \t\n\x01 end"

func TestClientStatusFromServer(t *testing.T) {
	p := startGRPCPeer(t, true)
	c := newTestClient(t, p, nil)
	for _, mode := range []string{"fail", "echo"} {
		t.Run(mode, func(t *testing.T) {
			c.cfg.Header = nil
			cl := newTestClientConfig(t, c.cfg, map[string]string{"x-mode": mode, "x-code": "9", "x-msg": "odd"})
			s, err := cl.Open(testCtx(t), testMethod)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if mode == "echo" {
				if err := sendBytes(s, []byte("ping")); err != nil {
					t.Fatal(err)
				}
				if got, err := recvAll(s, 100); err != nil || string(got) != "ping" {
					t.Fatalf("echo: %q, %v", got, err)
				}
				s.CloseSend()
			}
			_, err = s.RecvMsgHeader()
			st, _ := status.FromError(err)
			if st.Code() != codes.FailedPrecondition || st.Message() != oddMessage {
				t.Fatalf("status %v %q, want FailedPrecondition %q", st.Code(), st.Message(), oddMessage)
			}
			// The end is sticky.
			if _, err2 := s.RecvMsgHeader(); err2 != err {
				t.Fatalf("second RecvMsgHeader: %v, want %v", err2, err)
			}
		})
	}
}

func TestClientHeadersSent(t *testing.T) {
	p := startGRPCPeer(t, true)
	c := newTestClient(t, p, map[string]string{"authorization": "Bearer tok", "ClusterID": "Kubernetes"})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	md := <-p.headers
	for k, want := range map[string]string{
		":authority":    p.addr,
		"content-type":  "application/grpc",
		"authorization": "Bearer tok",
		"clusterid":     "Kubernetes",
	} {
		if got := md.Get(k); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	// grpc-go appends its own product to the user-agent it reports.
	if ua := md.Get("user-agent"); len(ua) != 1 || len(ua[0]) < len(userAgent) || ua[0][:len(userAgent)] != userAgent {
		t.Errorf("user-agent %q", ua)
	}
}

func TestClientHeaderFuncError(t *testing.T) {
	p := startGRPCPeer(t, false)
	cfg := ClientConfig{Address: p.addr}
	cfg.Header = func(context.Context) (http.Header, error) { return nil, errors.New("token file unreadable") }
	c := newTestClientConfig(t, cfg, nil)
	if _, err := c.Open(testCtx(t), testMethod); status.Code(err) != codes.Unavailable {
		t.Fatalf("Open: %v, want Unavailable", err)
	}
	cfg.Header = func(context.Context) (http.Header, error) {
		return nil, status.Error(codes.Unauthenticated, "no token")
	}
	c = newTestClientConfig(t, cfg, nil)
	if _, err := c.Open(testCtx(t), testMethod); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Open: %v, want Unauthenticated", err)
	}
}

func TestClientBadMetadataRefused(t *testing.T) {
	p := startGRPCPeer(t, false)
	c := newTestClient(t, p, map[string]string{"x-bad": "a\nb"})
	if _, err := c.Open(testCtx(t), testMethod); status.Code(err) != codes.Internal {
		t.Fatalf("Open: %v, want Internal", err)
	}
}

func TestClientCancel(t *testing.T) {
	p := startGRPCPeer(t, true)
	c := newTestClient(t, p, map[string]string{"x-mode": "wait"})

	// Close: the server's handler sees its context end. In "wait" mode grpc-go's server sends
	// no response headers at all (it sends them with the first message), so Open returning
	// here also shows it does not wait for them, as Istiod's streams need.
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	<-p.headers
	s.Close()
	s.Close() // idempotent
	if err := <-p.ended; err == nil {
		t.Fatal("server handler ended without its context being cancelled")
	}
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.Canceled {
		t.Fatalf("RecvMsgHeader after Close: %v, want Canceled", err)
	}

	// The Open context ending does the same, and RecvMsgHeader in progress returns Canceled.
	ctx, cancel := context.WithCancel(testCtx(t))
	s, err = c.Open(ctx, testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-p.headers
	errc := make(chan error, 1)
	go func() {
		_, err := s.RecvMsgHeader()
		errc <- err
	}()
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("RecvMsgHeader: %v, want Canceled", err)
	}
	if err := <-p.ended; err == nil {
		t.Fatal("server handler ended without its context being cancelled")
	}
}

func TestClientServerGoesAwayMidMessage(t *testing.T) {
	p := startGRPCPeer(t, true)
	c := newTestClient(t, p, map[string]string{"x-mode": "send", "x-size": "10485760"})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, err := s.RecvMsgHeader()
	if err != nil || n != 10<<20 {
		t.Fatalf("RecvMsgHeader: %d, %v", n, err)
	}
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(s, buf); err != nil {
		t.Fatal(err)
	}
	// The client's windows (1 MiB) keep most of the message on the server's side.
	go p.srv.Stop()
	for err == nil {
		_, err = s.Read(buf)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Read after the server went away: %v, want Unavailable", err)
	}
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.Unavailable {
		t.Fatalf("RecvMsgHeader: %v, want Unavailable", err)
	}
	p.done.Wait()
}

func TestClientRedialsAfterServerDown(t *testing.T) {
	// Reserve an address, then free it: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := newTestClientConfig(t, ClientConfig{Address: addr}, nil)
	if _, err := c.Open(testCtx(t), testMethod); status.Code(err) != codes.Unavailable {
		t.Fatalf("Open with the server down: %v, want Unavailable", err)
	}
	p := startGRPCPeerAt(t, false, addr)
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatalf("Open with the server up: %v", err)
	}
	if err := sendBytes(s, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, err := recvAll(s, 10); err != nil || string(got) != "x" {
		t.Fatalf("echo: %q %v", got, err)
	}
	s.Close()

	// The server restarts: the stream on the lost connection fails Unavailable, the next Open
	// dials again.
	s, err = c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := sendBytes(s, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := recvAll(s, 10); err != nil {
		t.Fatal(err)
	}
	p.stop()
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.Unavailable {
		t.Fatalf("RecvMsgHeader after the server stopped: %v, want Unavailable", err)
	}
	p2 := startGRPCPeerAt(t, false, addr)
	s2, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatalf("Open after restart: %v", err)
	}
	defer s2.Close()
	if err := sendBytes(s2, []byte("z")); err != nil {
		t.Fatal(err)
	}
	if got, err := recvAll(s2, 10); err != nil || string(got) != "z" {
		t.Fatalf("echo after restart: %q %v", got, err)
	}
	if got := p2.lis.accepts.Load(); got != 1 {
		t.Fatalf("%d connections to the restarted server, want 1", got)
	}
}

// TestClientGoAway: Istiod sends GOAWAY at its MaxConnectionAge. The streams on that
// connection go on; the next Open dials a new connection instead of failing on the old one.
func TestClientGoAway(t *testing.T) {
	p := startGRPCPeerAt(t, true, "127.0.0.1:0", grpc.KeepaliveParams(keepalive.ServerParameters{
		MaxConnectionAge:      50 * time.Millisecond,
		MaxConnectionAgeGrace: time.Minute,
	}))
	c := newTestClient(t, p, nil)
	old, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := sendBytes(old, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := recvAll(old, 10); err != nil {
		t.Fatal(err)
	}
	// Open until a stream lands on a second connection (after the GOAWAY).
	for p.lis.accepts.Load() < 2 {
		s, err := c.Open(testCtx(t), testMethod)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := sendBytes(s, []byte("b")); err == io.EOF {
			// A stream racing the GOAWAY is refused: it ends Unavailable (the proxy's
			// routine reconnect), never hangs.
			_, err := s.RecvMsgHeader()
			t.Logf("stream racing the GOAWAY: %v", err)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("refused stream: %v, want Unavailable", err)
			}
			s.Close()
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if got, err := recvAll(s, 10); err != nil || string(got) != "b" {
			t.Fatalf("echo: %q %v", got, err)
		}
		s.Close()
	}
	// The stream on the first connection still works.
	if err := sendBytes(old, []byte("c")); err != nil {
		t.Fatal(err)
	}
	if got, err := recvAll(old, 10); err != nil || string(got) != "c" {
		t.Fatalf("old stream after GOAWAY: %q %v", got, err)
	}
}

func TestClientOneConnectionForManyStreams(t *testing.T) {
	p := startGRPCPeer(t, true)
	c := newTestClient(t, p, nil)
	const streams = 30
	var wg sync.WaitGroup
	errc := make(chan error, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.Open(testCtx(t), testMethod)
			if err != nil {
				errc <- err
				return
			}
			defer s.Close()
			want := pattern(1000+i, i)
			for range 3 {
				if err := sendBytes(s, want); err != nil {
					errc <- err
					return
				}
				got, err := recvAll(s, 512)
				if err != nil {
					errc <- err
					return
				}
				if string(got) != string(want) {
					errc <- errors.New("echo differs")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if got := p.lis.accepts.Load(); got != 1 {
		t.Fatalf("%d connections for %d streams, want 1", got, streams)
	}
}

func TestClientMaxRecvMsgBytes(t *testing.T) {
	p := startGRPCPeer(t, false)
	c := newTestClientConfig(t, ClientConfig{Address: p.addr, MaxRecvMsgBytes: 1000}, map[string]string{"x-mode": "send", "x-size": "1001"})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("RecvMsgHeader: %v, want ResourceExhausted", err)
	}
	// Sending on a stream the receiver has ended does not block: io.EOF, as grpc-go.
	if err := sendBytes(s, []byte("late")); err != io.EOF {
		t.Fatalf("SendMsg after the end: %v, want io.EOF", err)
	}
	if err := <-p.ended; err == nil {
		t.Fatal("the server's stream was not reset")
	}
}

func TestClientClosedRefusesOpen(t *testing.T) {
	p := startGRPCPeer(t, false)
	c := newTestClient(t, p, nil)
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Fatalf("stream after Client.Close: %v", err)
	}
	s.Close()
	if _, err := c.Open(testCtx(t), testMethod); status.Code(err) != codes.Canceled {
		t.Fatalf("Open after Close: %v, want Canceled", err)
	}
}
