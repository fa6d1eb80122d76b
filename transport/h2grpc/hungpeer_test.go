package h2grpc

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

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
// wait for the test's 60 s deadline and end DeadlineExceeded). The timeout is 10 s: a live
// server on a loaded machine may take far longer than 100 ms to answer a ping sent before the
// freeze, and the test must not take that for a hang.
func TestClientKeepalive(t *testing.T) {
	t.Parallel() // each waits out its 10 s keepalive timeout
	p := startGRPCPeer(t, false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := startFreezer(t, l, func() (net.Conn, error) { return net.Dial("tcp", p.addr) })
	c := newTestClientConfig(t, ClientConfig{Address: l.Addr().String(), KeepaliveTime: 100 * time.Millisecond, KeepaliveTimeout: 10 * time.Second}, nil)
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
// handler's context ends. A 10 s timeout, as in TestClientKeepalive.
func TestServerKeepalive(t *testing.T) {
	t.Parallel() // each waits out its 10 s keepalive timeout
	ended := make(chan error, 1)
	_, path := startServer(t, ServerConfig{KeepaliveTime: 100 * time.Millisecond, KeepaliveTimeout: 10 * time.Second}, map[string]Handler{testMethod: func(ss *ServerStream) error {
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
//
// The stall is an event, not a quiet spell: a windowTap between the two reads every frame and
// knows the windows the client has granted (SETTINGS_INITIAL_WINDOW_SIZE and WINDOW_UPDATEs it
// forwarded) and the DATA the server sent; the server is stalled exactly when the DATA sent
// equals the smaller of the stream's and the connection's window (it has 10 MiB more to send).
// A PING injected after that point and answered by the client then proves that the client
// granted nothing in reaction to the DATA before it (frames are handled in order), so the
// stall is final, not a pause before a grant the test would otherwise miss.
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
			tap := startWindowTap(t, l, func() (net.Conn, error) { return net.Dial("tcp", p.addr) })
			c := newTestClientConfig(t, ClientConfig{Address: l.Addr().String(), StreamWindow: tc.window, ConnWindow: tc.window, MaxRecvMsgBytes: 64 << 20},
				map[string]string{"x-mode": "send", "x-size": "10485760"})
			ctx := testCtx(t)
			s, err := c.Open(ctx, testMethod)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Read nothing; wait until the server has used up the window, then for the
			// client's answer to a PING sent behind the last DATA.
			if err := tap.awaitStall(ctx); err != nil {
				t.Fatal(err)
			}
			got := tap.dataSent()
			t.Logf("%d KiB on the wire unread with window %d (%s)", got>>10, tc.window, tap)
			if got < tc.least || got > tc.most {
				t.Fatalf("%d bytes sent to a reader that read nothing, want %d..%d", got, tc.least, tc.most)
			}
			if _, err := recvAll(s, 64<<10); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// windowTap forwards one HTTP/2 (h2c) connection frame by frame between an accepted client
// and target, keeping the flow-control account of RFC 9113 section 6.9 as the server sees it.
type windowTap struct {
	wg sync.WaitGroup

	// changed is signalled (without blocking) after each frame forwarded and each of the
	// tap's own PINGs acknowledged.
	changed chan struct{}

	mu sync.Mutex
	// Guarded by mu: the connections, the account, and writes to the client (so that a PING
	// is injected between two whole frames).
	conns      []net.Conn
	client     net.Conn
	streamInit int64            // the client's SETTINGS_INITIAL_WINDOW_SIZE (65535 until sent)
	connGrant  int64            // the connection window granted: 65535 + WINDOW_UPDATEs on 0
	grants     map[uint32]int64 // WINDOW_UPDATE increments per stream
	data       map[uint32]int64 // DATA payload (padding included) per stream
	stream     uint32           // the first stream the client opened
	pings      uint32           // the tap's PINGs sent (numbered from 1)
	acked      uint32           // the last of them the client acknowledged (not forwarded)
}

// tapPingMark begins the payload of the tap's PINGs (a 4-byte number follows), unlike any the
// peers send.
const tapPingMark = "wtap"

func startWindowTap(t *testing.T, l net.Listener, target func() (net.Conn, error)) *windowTap {
	tap := &windowTap{changed: make(chan struct{}, 1),
		streamInit: 65535, connGrant: 65535, grants: map[uint32]int64{}, data: map[uint32]int64{}}
	tap.wg.Add(1)
	go func() {
		defer tap.wg.Done()
		c, err := l.Accept() // one connection: the account is per connection
		if err != nil {
			return
		}
		u, err := target()
		tap.mu.Lock()
		tap.conns = append(tap.conns, c)
		if err != nil {
			tap.mu.Unlock()
			c.Close()
			return
		}
		tap.conns = append(tap.conns, u)
		tap.client = c
		tap.mu.Unlock()
		tap.wg.Add(2)
		go tap.pump(u, c, true)
		go tap.pump(c, u, false)
	}()
	t.Cleanup(func() {
		l.Close()
		tap.mu.Lock()
		for _, c := range tap.conns {
			c.Close()
		}
		tap.mu.Unlock()
		tap.wg.Wait()
	})
	return tap
}

// pump copies frames from src to dst (up: from the client, after its 24-byte preface).
func (tap *windowTap) pump(dst, src net.Conn, up bool) {
	defer tap.wg.Done()
	defer dst.Close()
	if up {
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(src, preface); err != nil {
			return
		}
		if _, err := dst.Write(preface); err != nil {
			return
		}
	}
	hdr := make([]byte, 9)
	var payload []byte
	for {
		if _, err := io.ReadFull(src, hdr); err != nil {
			return
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := http2.FrameType(hdr[3]), http2.Flags(hdr[4])
		id := binary.BigEndian.Uint32(hdr[5:]) & (1<<31 - 1)
		if cap(payload) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(src, payload); err != nil {
			return
		}
		var err error
		tap.mu.Lock()
		if up && typ == http2.FramePing && flags.Has(http2.FlagPingAck) && string(payload[:4]) == tapPingMark {
			tap.acked = binary.BigEndian.Uint32(payload[4:])
		} else {
			tap.account(up, typ, flags, id, payload)
			_, err = dst.Write(append(hdr[:9:9], payload...))
		}
		tap.mu.Unlock()
		if err != nil {
			return
		}
		select {
		case tap.changed <- struct{}{}:
		default:
		}
	}
}

// account applies one frame to the flow-control account; the caller holds mu.
func (tap *windowTap) account(up bool, typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) {
	switch {
	case up && typ == http2.FrameSettings && !flags.Has(http2.FlagSettingsAck):
		for p := payload; len(p) >= 6; p = p[6:] {
			if http2.SettingID(binary.BigEndian.Uint16(p)) == http2.SettingInitialWindowSize {
				tap.streamInit = int64(binary.BigEndian.Uint32(p[2:]))
			}
		}
	case up && typ == http2.FrameWindowUpdate && len(payload) == 4:
		inc := int64(binary.BigEndian.Uint32(payload) & (1<<31 - 1))
		if id == 0 {
			tap.connGrant += inc
		} else {
			tap.grants[id] += inc
		}
	case up && typ == http2.FrameHeaders && tap.stream == 0:
		tap.stream = id
	case !up && typ == http2.FrameData:
		tap.data[id] += int64(len(payload))
	}
}

// stalledLocked reports whether the server has sent all the window the client granted on its
// stream or on the connection; the caller holds mu.
func (tap *windowTap) stalledLocked() bool {
	if tap.stream == 0 {
		return false
	}
	var all int64
	for _, n := range tap.data {
		all += n
	}
	return tap.data[tap.stream] == tap.streamInit+tap.grants[tap.stream] || all == tap.connGrant
}

func (tap *windowTap) stalled() bool {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return tap.stalledLocked()
}

// awaitStall waits until the server has stalled on flow control for good: it has sent all the
// window granted, and the client, having answered a PING written behind that DATA, granted
// nothing more in reaction to it.
func (tap *windowTap) awaitStall(ctx context.Context) error {
	var seq uint32
	for {
		tap.mu.Lock()
		stalled := tap.stalledLocked()
		if seq == 0 && stalled {
			tap.pings++
			seq = tap.pings
			ping := binary.BigEndian.AppendUint32(append([]byte{0, 0, 8, byte(http2.FramePing), 0, 0, 0, 0, 0}, tapPingMark...), seq)
			if _, err := tap.client.Write(ping); err != nil {
				tap.mu.Unlock()
				return fmt.Errorf("writing the PING: %w", err)
			}
		}
		acked := seq != 0 && tap.acked >= seq
		tap.mu.Unlock()
		if acked {
			if !stalled {
				return fmt.Errorf("the client granted more window to a stream nobody read: %s", tap)
			}
			return nil
		}
		select {
		case <-tap.changed:
		case <-ctx.Done():
			if seq == 0 {
				return fmt.Errorf("the server never stalled on flow control: %s", tap)
			}
			return fmt.Errorf("the client never answered the PING sent after the stall: %s", tap)
		}
	}
}

func (tap *windowTap) dataSent() int64 {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return tap.data[tap.stream]
}

func (tap *windowTap) String() string {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return fmt.Sprintf("stream %d: DATA %d of window %d+%d; connection: window %d",
		tap.stream, tap.data[tap.stream], tap.streamInit, tap.grants[tap.stream], tap.connGrant)
}
