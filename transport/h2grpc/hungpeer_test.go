package h2grpc

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// freezer forwards connections from its listener to target until frozen; then it stops
// moving bytes (connections stay open), as a peer that hangs would.
type freezer struct {
	l      net.Listener
	target func() (net.Conn, error)
	frozen chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	// down counts the bytes moved from target to the accepted side; moved is signalled
	// (without blocking) after each write of them.
	down  atomic.Int64
	moved chan struct{}
}

func startFreezer(t *testing.T, l net.Listener, target func() (net.Conn, error)) *freezer {
	f := &freezer{l: l, target: target, frozen: make(chan struct{}), moved: make(chan struct{}, 1)}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := target()
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, u)
			f.mu.Unlock()
			f.wg.Add(2)
			go f.pump(c, u, true)
			go f.pump(u, c, false)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.freeze()
		f.wg.Wait()
	})
	return f
}

func (f *freezer) freeze() { f.once.Do(func() { close(f.frozen) }) }

func (f *freezer) pump(dst, src net.Conn, down bool) {
	defer f.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-f.frozen:
			io.Copy(io.Discard, src) // swallow until closed
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if down {
				f.down.Add(int64(n))
				select {
				case f.moved <- struct{}{}:
				default:
				}
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// TestClientKeepalive: with KeepaliveTime set, a connection whose server stops answering is
// closed after KeepaliveTimeout and its streams end Unavailable (unwired, the stream would
// wait for the test's 60 s deadline and end DeadlineExceeded).
func TestClientKeepalive(t *testing.T) {
	p := startGRPCPeer(t, false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := startFreezer(t, l, func() (net.Conn, error) { return net.Dial("tcp", p.addr) })
	c := newTestClientConfig(t, ClientConfig{Address: l.Addr().String(), KeepaliveTime: 100 * time.Millisecond, KeepaliveTimeout: 100 * time.Millisecond}, nil)
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := sendBytes(s, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := recvAll(s, 10); err != nil {
		t.Fatal(err)
	}
	f.freeze()
	start := time.Now()
	_, err = s.RecvMsgHeader()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("stream on a hung connection: %v, want Unavailable", err)
	}
	t.Logf("hung connection detected after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestServerKeepalive: the server's pings find a client that stopped answering; the
// handler's context ends.
func TestServerKeepalive(t *testing.T) {
	ended := make(chan error, 1)
	_, path := startServer(t, ServerConfig{KeepaliveTime: 100 * time.Millisecond, KeepaliveTimeout: 100 * time.Millisecond}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		msg, err := ss.RecvMsg()
		if err != nil {
			return err
		}
		ss.SendMsg(msg)
		msg.Free()
		<-ss.Context().Done()
		ended <- ss.Context().Err()
		return nil
	}})
	l, err := net.Listen("unix", t.TempDir()+"/f.sock")
	if err != nil {
		t.Fatal(err)
	}
	f := startFreezer(t, l, func() (net.Conn, error) { return net.Dial("unix", path) })
	cs := openGRPC(t, l.Addr().String(), grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", l.Addr().String())
	}))
	b := []byte("a")
	if err := cs.SendMsg(&b); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := cs.RecvMsg(&got); err != nil {
		t.Fatal(err)
	}
	f.freeze()
	if err := <-ended; err == nil {
		t.Fatal("handler context ended without error")
	}
}

// TestClientStreamWindowBoundsUnread: what the server can send before the reader reads is
// the receive window: with 64 KiB windows the bytes on the wire stall near 64 KiB, with the
// default 1 MiB stream window near 1 MiB. This is what bounds a slow Envoy's cost upstream.
func TestClientStreamWindowBoundsUnread(t *testing.T) {
	for _, tc := range []struct {
		name        string
		window      int
		least, most int64
	}{
		{"64KiB", 64 << 10, 32 << 10, 128 << 10},
		{"default", 0, 512 << 10, 1536 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startGRPCPeer(t, false)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			f := startFreezer(t, l, func() (net.Conn, error) { return net.Dial("tcp", p.addr) })
			c := newTestClientConfig(t, ClientConfig{Address: l.Addr().String(), StreamWindow: tc.window, ConnWindow: tc.window, MaxRecvMsgBytes: 64 << 20},
				map[string]string{"x-mode": "send", "x-size": "10485760"})
			s, err := c.Open(testCtx(t), testMethod)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Read nothing; wait until the wire is quiet.
			for {
				select {
				case <-f.moved:
					continue
				case <-time.After(300 * time.Millisecond):
				}
				break
			}
			got := f.down.Load()
			t.Logf("%d KiB on the wire unread with window %d", got>>10, tc.window)
			if got < tc.least || got > tc.most {
				t.Fatalf("%d bytes sent to a reader that read nothing, want %d..%d", got, tc.least, tc.most)
			}
			if _, err := recvAll(s, 64<<10); err != nil {
				t.Fatal(err)
			}
		})
	}
}
