package h2grpc

import (
	"context"
	"io"
	"net"
	"sync"
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
}

func startFreezer(t *testing.T, l net.Listener, target func() (net.Conn, error)) *freezer {
	f := &freezer{l: l, target: target, frozen: make(chan struct{})}
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
			go f.pump(c, u)
			go f.pump(u, c)
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

func (f *freezer) pump(dst, src net.Conn) {
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
