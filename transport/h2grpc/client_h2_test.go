package h2grpc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// rawPeer is an HTTP/2 server written frame by frame, for what a grpc-go server never does
// (GOAWAY at a chosen stream, a tiny MAX_CONCURRENT_STREAMS, flow-control violations, unanswered
// pings). Each accepted connection is handed to the test as a rawConn.
type rawPeer struct {
	lis   net.Listener
	conns chan *rawConn
	wg    sync.WaitGroup
}

type rawConn struct {
	nc  net.Conn
	fr  *http2.Framer
	bw  *bufio.Writer
	enc *hpack.Encoder
	hb  bytes.Buffer
}

func startRawPeer(t *testing.T, settings ...http2.Setting) *rawPeer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{lis: lis, conns: make(chan *rawConn, 4)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			preface := make([]byte, len(http2.ClientPreface))
			if _, err := io.ReadFull(nc, preface); err != nil || string(preface) != http2.ClientPreface {
				nc.Close()
				continue
			}
			c := &rawConn{nc: nc, bw: bufio.NewWriter(nc)}
			c.fr = http2.NewFramer(c.bw, bufio.NewReader(nc))
			c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			c.enc = hpack.NewEncoder(&c.hb)
			c.fr.WriteSettings(settings...)
			c.bw.Flush()
			p.conns <- c
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		p.wg.Wait()
		close(p.conns)
		for c := range p.conns {
			c.nc.Close()
		}
	})
	return p
}

func (p *rawPeer) accept(t *testing.T) *rawConn {
	t.Helper()
	select {
	case c := <-p.conns:
		t.Cleanup(func() { c.nc.Close() })
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection")
		return nil
	}
}

// next reads frames until one satisfies keep (copying what the test needs before the next read).
func (c *rawConn) next(t *testing.T, keep func(http2.Frame) bool) {
	t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("peer read: %v", err)
		}
		if keep(f) {
			return
		}
	}
}

// headers waits for a stream's HEADERS and returns its ID.
func (c *rawConn) headers(t *testing.T) uint32 {
	t.Helper()
	var id uint32
	c.next(t, func(f http2.Frame) bool {
		if h, ok := f.(*http2.MetaHeadersFrame); ok {
			id = h.StreamID
			return true
		}
		return false
	})
	return id
}

func (c *rawConn) writeHeaders(id uint32, end bool, kv ...string) {
	c.hb.Reset()
	for i := 0; i < len(kv); i += 2 {
		c.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hb.Bytes(), EndHeaders: true, EndStream: end})
	c.bw.Flush()
}

func (c *rawConn) respond(id uint32, msg []byte, code codes.Code) {
	c.writeHeaders(id, false, ":status", "200", "content-type", "application/grpc")
	var hdr [prefixLen]byte
	putPrefix(&hdr, len(msg))
	c.fr.WriteData(id, false, append(hdr[:], msg...))
	c.writeHeaders(id, true, "grpc-status", string(rune('0'+int(code))))
}

func clientOfRawPeer(t *testing.T, p *rawPeer, cfg ClientConfig) *Client {
	t.Helper()
	cfg.Address = p.lis.Addr().String()
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func recvOne(s *ClientStream) ([]byte, error) {
	n, err := s.RecvMsgHeader()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	_, err = io.ReadFull(s, b)
	return b, err
}

// TestClientWaitsForStreamSlot: with MAX_CONCURRENT_STREAMS 1 the second Open waits until the
// first stream is over (RFC 9113 section 5.1.2), then takes the next odd ID.
func TestClientWaitsForStreamSlot(t *testing.T) {
	p := startRawPeer(t, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1})
	c := clientOfRawPeer(t, p, ClientConfig{})
	s1, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	rc := p.accept(t)
	// The first stream's HEADERS, and the SETTINGS ACK that shows the limit reached the client.
	var id uint32
	acked := false
	rc.next(t, func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			id = f.StreamID
		case *http2.SettingsFrame:
			acked = acked || f.IsAck()
		}
		return id != 0 && acked
	})
	if id != 1 {
		t.Fatalf("first stream ID %d, want 1", id)
	}
	opened := make(chan *ClientStream, 1)
	go func() {
		s2, err := c.Open(testCtx(t), testMethod)
		if err != nil {
			t.Error(err)
		}
		opened <- s2
	}()
	select {
	case <-opened:
		t.Fatal("second stream opened beyond MAX_CONCURRENT_STREAMS")
	case <-time.After(50 * time.Millisecond):
	}
	rc.respond(1, []byte("one"), codes.OK)
	if id := rc.headers(t); id != 3 {
		t.Fatalf("second stream ID %d, want 3", id)
	}
	s2 := <-opened
	defer s2.Close()
	if got, err := recvOne(s1); err != nil || string(got) != "one" {
		t.Fatalf("first stream: %q %v", got, err)
	}
	if _, err := s1.RecvMsgHeader(); err != io.EOF {
		t.Fatalf("first stream end: %v, want io.EOF", err)
	}
}

// TestClientGoAwayLastStreamID: streams above the GOAWAY's last stream ID fail Unavailable, those at or
// below it finish, and the next Open dials a new connection.
func TestClientGoAwayLastStreamID(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{})
	s1, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	rc := p.accept(t)
	rc.headers(t)
	s3, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	rc.headers(t)
	rc.fr.WriteGoAway(1, http2.ErrCodeNo, nil)
	rc.bw.Flush()
	if _, err := s3.RecvMsgHeader(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream 3 after GOAWAY(1): %v, want Unavailable", err)
	}
	rc.respond(1, []byte("kept"), codes.OK)
	if got, err := recvOne(s1); err != nil || string(got) != "kept" {
		t.Fatalf("stream 1 after GOAWAY(1): %q %v", got, err)
	}
	s5, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s5.Close()
	rc2 := p.accept(t)
	if id := rc2.headers(t); id != 1 {
		t.Fatalf("stream on the new connection has ID %d, want 1", id)
	}
}

// TestClientResetCodes: RST_STREAM maps to grpc codes as grpc-go's http2ErrConvTab does.
func TestClientResetCodes(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{})
	var rc *rawConn
	for _, tc := range []struct {
		code http2.ErrCode
		want codes.Code
	}{
		{http2.ErrCodeRefusedStream, codes.Unavailable},
		{http2.ErrCodeCancel, codes.Canceled},
		{http2.ErrCodeEnhanceYourCalm, codes.ResourceExhausted},
		{http2.ErrCodeProtocol, codes.Internal},
	} {
		s, err := c.Open(testCtx(t), testMethod)
		if err != nil {
			t.Fatal(err)
		}
		if rc == nil {
			rc = p.accept(t)
		}
		id := rc.headers(t)
		rc.fr.WriteRSTStream(id, tc.code)
		rc.bw.Flush()
		if _, err := s.RecvMsgHeader(); status.Code(err) != tc.want {
			t.Errorf("RST_STREAM %v: %v, want %v", tc.code, err, tc.want)
		}
		if err := s.SendMsg(mem.BufferSlice{mem.SliceBuffer("x")}); err != io.EOF {
			t.Errorf("SendMsg after RST_STREAM: %v, want io.EOF", err)
		}
		s.Close()
	}
}

// TestClientStreamFlowControlViolation: DATA beyond the stream window resets that stream
// with FLOW_CONTROL_ERROR (RFC 9113 section 6.9) and leaves the connection up.
func TestClientStreamFlowControlViolation(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{StreamWindow: 64 << 10, ConnWindow: 1 << 20})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	id := rc.headers(t)
	rc.writeHeaders(id, false, ":status", "200", "content-type", "application/grpc")
	chunk := make([]byte, 16<<10)
	for range 5 { // 80 KiB into a 64 KiB window
		rc.fr.WriteData(id, false, chunk)
	}
	rc.bw.Flush()
	var code http2.ErrCode
	rc.next(t, func(f http2.Frame) bool {
		if r, ok := f.(*http2.RSTStreamFrame); ok && r.StreamID == id {
			code = r.ErrCode
			return true
		}
		return false
	})
	if code != http2.ErrCodeFlowControl {
		t.Fatalf("RST_STREAM %v, want FLOW_CONTROL_ERROR", code)
	}
	// The connection still serves streams.
	s2, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	id2 := rc.headers(t)
	rc.respond(id2, []byte("fine"), codes.OK)
	if got, err := recvOne(s2); err != nil || string(got) != "fine" {
		t.Fatalf("next stream: %q %v", got, err)
	}
}

// TestClientConnWindowGrantedOnArrival: the connection window is granted back as DATA arrives,
// read or not (core_recv.go), so a stream nobody reads does not hold the window the others
// need. With 64 KiB windows, 48 KiB arrive on a stream nobody reads yet and 48 KiB on a second
// one (96 KiB in all, over the connection window first advertised): the client grants the
// connection window for all of it before any read, grants no stream window (nothing read),
// and both messages are then read whole. Under the client's earlier rule (connection window
// granted on read) the second stream's last 32 KiB went beyond the window and the connection
// ended with GOAWAY FLOW_CONTROL_ERROR (checked). The connection check itself is
// TestConnWindowOverrun: with ConnWindow at least 4 frames, on-arrival grants never let a
// peer that keeps to the window exceed it.
func TestClientConnWindowGrantedOnArrival(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{StreamWindow: 64 << 10, ConnWindow: 64 << 10})
	s1, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	rc := p.accept(t)
	id1, id2 := rc.headers(t), rc.headers(t)
	msg := pattern(48<<10-prefixLen, 3)
	var hdr [prefixLen]byte
	putPrefix(&hdr, len(msg))
	for _, id := range []uint32{id1, id2} {
		rc.writeHeaders(id, false, ":status", "200", "content-type", "application/grpc")
		for body := append(hdr[:], msg...); len(body) > 0; body = body[16<<10:] {
			rc.fr.WriteData(id, false, body[:16<<10])
		}
	}
	rc.bw.Flush()
	var granted int64
	rc.next(t, func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v before any read", f.ErrCode)
		case *http2.WindowUpdateFrame:
			if f.StreamID != 0 {
				t.Fatalf("WINDOW_UPDATE of stream %d, which nobody read", f.StreamID)
			}
			granted += int64(f.Increment)
		}
		return granted == 96<<10
	})
	for _, s := range []*ClientStream{s2, s1} {
		got, err := recvOne(s)
		if err != nil {
			t.Fatal(err)
		}
		bytesEqual(t, got, msg)
	}
}

// TestConnWindowOverrun: DATA beyond the connection receive window is a connection
// FLOW_CONTROL_ERROR (RFC 9113 section 6.9.1; x/net's client and server, whose grants come on
// read, can meet it). The windows are set by hand: on-arrival grants keep a peer that keeps to
// the window from reaching the check (TestClientConnWindowGrantedOnArrival).
func TestConnWindowOverrun(t *testing.T) {
	c := &conn{recvWindow: 64 << 10, recvWin: 100}
	_, _, err := c.readDataStart(http2.FrameHeader{Type: http2.FrameData, StreamID: 1, Length: 101})
	if pe, ok := err.(connProtocolError); !ok || pe.code != http2.ErrCodeFlowControl {
		t.Fatalf("101 bytes into a window of 100: %v, want a connection FLOW_CONTROL_ERROR", err)
	}
	if _, _, err := c.readDataStart(http2.FrameHeader{Type: http2.FrameData, StreamID: 1, Length: 100}); err != nil || c.recvWin != 0 {
		t.Fatalf("100 bytes into a window of 100: %v, window left %d", err, c.recvWin)
	}
}

// TestClientWindowUpdatesBatched: reading costs one WINDOW_UPDATE per half stream window
// consumed (recvWindow), not one per read.
func TestClientWindowUpdatesBatched(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{MaxRecvMsgBytes: 4 << 20})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	id := rc.headers(t)
	const size = 512 << 10 // within the stream window: the peer here does no flow control
	msg := pattern(size, 7)
	updates := make(chan int, 1)
	go func() {
		// Counts the WINDOW_UPDATEs until the client's half-close, sent after its reads.
		n := 0
		for {
			f, err := rc.fr.ReadFrame()
			if err != nil {
				updates <- -1
				return
			}
			switch f := f.(type) {
			case *http2.WindowUpdateFrame:
				n++
			case *http2.DataFrame:
				if f.StreamID == id && f.StreamEnded() {
					updates <- n
					return
				}
			}
		}
	}()
	rc.writeHeaders(id, false, ":status", "200", "content-type", "application/grpc")
	var hdr [prefixLen]byte
	putPrefix(&hdr, len(msg))
	body := append(hdr[:], msg...)
	for len(body) > 0 {
		k := min(len(body), 16<<10)
		rc.fr.WriteData(id, false, body[:k])
		body = body[k:]
	}
	rc.bw.Flush()
	got, err := recvOne(s)
	if err != nil {
		t.Fatal(err)
	}
	bytesEqual(t, got, msg)
	s.CloseSend()
	// 512 KiB and the 5-byte prefix read: one stream grant (once half the 1 MiB window is
	// owed, however the reads fell); none yet of the 4 MiB connection window.
	if n := <-updates; n != 1 {
		t.Fatalf("%d WINDOW_UPDATEs for 512 KiB read, want 1", n)
	}
	rc.writeHeaders(id, true, "grpc-status", "0")
	if _, err := s.RecvMsgHeader(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// TestClientKeepaliveUnanswered: a server that stops answering pings loses the connection
// after KeepaliveTime+KeepaliveTimeout; the stream fails Unavailable.
func TestClientKeepaliveUnanswered(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{KeepaliveTime: 20 * time.Millisecond, KeepaliveTimeout: 50 * time.Millisecond})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	rc.headers(t)
	rc.next(t, func(f http2.Frame) bool {
		pf, ok := f.(*http2.PingFrame)
		return ok && !pf.IsAck()
	})
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.Unavailable {
		t.Fatalf("RecvMsgHeader with pings unanswered: %v, want Unavailable", err)
	}
}

// TestClientAnswersPing: a PING from the server is acknowledged with its data.
func TestClientAnswersPing(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	rc.headers(t)
	data := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	rc.fr.WritePing(false, data)
	rc.bw.Flush()
	rc.next(t, func(f http2.Frame) bool {
		pf, ok := f.(*http2.PingFrame)
		return ok && pf.IsAck() && pf.Data == data
	})
}

// TestClientMalformedHeadersResetStream: a response without :status is a stream error, not a
// connection error.
func TestClientMalformedHeadersResetStream(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{})
	s, err := c.Open(context.Background(), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	id := rc.headers(t)
	rc.writeHeaders(id, false, "content-type", "application/grpc")
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.Internal {
		t.Fatalf("RecvMsgHeader: %v, want Internal", err)
	}
	s2, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	id2 := rc.headers(t)
	rc.respond(id2, []byte("ok"), codes.OK)
	if got, err := recvOne(s2); err != nil || string(got) != "ok" {
		t.Fatalf("next stream: %q %v", got, err)
	}
}

// TestClientSkipsUnreadRest: RecvMsgHeader skips what was left unread of the previous message,
// across DATA frames, and the skipped bytes are granted back like read ones.
func TestClientSkipsUnreadRest(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{StreamWindow: 64 << 10, ConnWindow: 64 << 10})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	id := rc.headers(t)
	rc.writeHeaders(id, false, ":status", "200", "content-type", "application/grpc")
	first := pattern(60<<10, 1) // most of both windows: the skip must grant them back
	second := []byte("second")
	for _, m := range [][]byte{first, second} {
		var hdr [prefixLen]byte
		putPrefix(&hdr, len(m))
		body := append(hdr[:], m...)
		for len(body) > 0 {
			k := min(len(body), 16<<10)
			rc.fr.WriteData(id, false, body[:k])
			body = body[k:]
		}
		rc.bw.Flush()
		if len(m) == len(first) {
			n, err := s.RecvMsgHeader()
			if err != nil || n != len(first) {
				t.Fatalf("first: %d %v", n, err)
			}
			buf := make([]byte, 3)
			if _, err := io.ReadFull(s, buf); err != nil || !bytes.Equal(buf, first[:3]) {
				t.Fatalf("first bytes %q %v", buf, err)
			}
		}
	}
	if got, err := recvOne(s); err != nil || !bytes.Equal(got, second) {
		t.Fatalf("second: %q %v", got, err)
	}
	// 60 KiB consumed: the server was granted stream and connection window back.
	conn, stream := false, false
	rc.next(t, func(f http2.Frame) bool {
		if w, ok := f.(*http2.WindowUpdateFrame); ok {
			conn = conn || w.StreamID == 0
			stream = stream || w.StreamID == id
		}
		return conn && stream
	})
}

// TestClientSendFlowControl: the client sends no more than the server's windows allow (here
// INITIAL_WINDOW_SIZE 0, then a stream grant of 1000 bytes) and splits DATA at the server's
// MAX_FRAME_SIZE (16384 by default).
func TestClientSendFlowControl(t *testing.T) {
	p := startRawPeer(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c := clientOfRawPeer(t, p, ClientConfig{})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	var id uint32
	acked := false
	rc.next(t, func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			id = f.StreamID
		case *http2.SettingsFrame:
			acked = acked || f.IsAck()
		}
		return id != 0 && acked
	})
	const size = 40000
	msg := pattern(size, 5)
	sent := make(chan error, 1)
	go func() { sent <- s.SendMsg(mem.BufferSlice{mem.SliceBuffer(msg)}) }()
	rc.fr.WriteWindowUpdate(id, 1000)
	rc.bw.Flush()
	var got []byte
	rc.next(t, func(f http2.Frame) bool {
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == id {
			got = append(got, d.Data()...)
		}
		return len(got) >= 1000
	})
	if len(got) != 1000 {
		t.Fatalf("%d bytes sent in a 1000-byte window", len(got))
	}
	select {
	case err := <-sent:
		t.Fatalf("SendMsg returned (%v) with the message not sent", err)
	default:
	}
	// The connection window (65535) now limits: grant it too.
	rc.fr.WriteWindowUpdate(id, 1<<20)
	rc.fr.WriteWindowUpdate(0, 1<<20)
	rc.bw.Flush()
	rc.next(t, func(f http2.Frame) bool {
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == id {
			if len(d.Data()) > 16384 {
				t.Errorf("DATA of %d bytes over MAX_FRAME_SIZE", len(d.Data()))
			}
			got = append(got, d.Data()...)
		}
		return len(got) >= prefixLen+size
	})
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[prefixLen:], msg) {
		t.Fatal("message differs")
	}
}

// TestClientKeepaliveAnswered: pings the server answers keep the connection: after several
// idle-time pings the stream still gets its response.
func TestClientKeepaliveAnswered(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{KeepaliveTime: 10 * time.Millisecond, KeepaliveTimeout: 5 * time.Second})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	id := rc.headers(t)
	for pings := 0; pings < 3; {
		rc.next(t, func(f http2.Frame) bool {
			pf, ok := f.(*http2.PingFrame)
			if ok && !pf.IsAck() {
				rc.fr.WritePing(true, pf.Data)
				rc.bw.Flush()
			}
			return ok
		})
		pings++
	}
	rc.respond(id, []byte("alive"), codes.OK)
	if got, err := recvOne(s); err != nil || string(got) != "alive" {
		t.Fatalf("after pings: %q %v", got, err)
	}
}

// TestClientWindowOverflow: a WINDOW_UPDATE taking a window past 2^31-1 is a
// FLOW_CONTROL_ERROR (RFC 9113 section 6.9.1): of the stream (RST_STREAM) or of the connection
// (GOAWAY).
func TestClientWindowOverflow(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	id := rc.headers(t)
	rc.fr.WriteWindowUpdate(id, 1<<31-1) // 65535 + 2^31-1
	rc.bw.Flush()
	rc.next(t, func(f http2.Frame) bool {
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == id && r.ErrCode == http2.ErrCodeFlowControl
	})
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.Internal {
		t.Fatalf("stream after its window overflowed: %v, want Internal", err)
	}
	rc.fr.WriteWindowUpdate(0, 1<<31-1)
	rc.bw.Flush()
	rc.next(t, func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		return ok && g.ErrCode == http2.ErrCodeFlowControl
	})
}

// goAwayCode reads until the client's GOAWAY and returns its code.
func (c *rawConn) goAwayCode(t *testing.T) http2.ErrCode {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second)) // a failsafe, not the evidence
	var code http2.ErrCode
	c.next(t, func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		if ok {
			code = g.ErrCode
		}
		return ok
	})
	return code
}

// TestClientSettingsFirst: the server's preface is a SETTINGS frame (RFC 9113 section 3.4);
// any other first frame is a connection PROTOCOL_ERROR and the stream fails.
func TestClientSettingsFirst(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c, err := NewClient(ClientConfig{Address: lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opened := make(chan error, 1)
	var s *ClientStream
	go func() {
		var err error
		s, err = c.Open(testCtx(t), testMethod)
		opened <- err
	}()
	nc, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	lis.Close() // an Open that finds the connection dead dials again: refused, not left waiting
	if _, err := io.ReadFull(nc, make([]byte, len(http2.ClientPreface))); err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(nc)
	rc := &rawConn{nc: nc, bw: bw, fr: http2.NewFramer(bw, bufio.NewReader(nc))}
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.fr.WritePing(false, [8]byte{1}) // not SETTINGS
	bw.Flush()
	if code := rc.goAwayCode(t); code != http2.ErrCodeProtocol {
		t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", code)
	}
	if err := <-opened; err == nil {
		_, err = s.RecvMsgHeader()
		if status.Code(err) != codes.Internal && status.Code(err) != codes.Unavailable {
			t.Fatalf("stream on a connection whose server sent no SETTINGS: %v", err)
		}
		s.Close()
	}
}

// TestClientInitialWindowOverflow: SETTINGS_INITIAL_WINDOW_SIZE that takes an open stream's
// send window past 2^31-1 is a connection FLOW_CONTROL_ERROR (RFC 9113 section 6.9.2).
func TestClientInitialWindowOverflow(t *testing.T) {
	p := startRawPeer(t)
	c := clientOfRawPeer(t, p, ClientConfig{})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	id := rc.headers(t)
	rc.fr.WriteWindowUpdate(id, 1<<31-1-initialWindow) // the stream's window at 2^31-1
	rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: initialWindow + 1})
	rc.bw.Flush()
	if code := rc.goAwayCode(t); code != http2.ErrCodeFlowControl {
		t.Fatalf("GOAWAY %v, want FLOW_CONTROL_ERROR", code)
	}
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.Internal {
		t.Fatalf("stream after the protocol error: %v, want Internal", err)
	}
}

// TestClientFramesOnIdleStreams: a server may not name a stream the client never opened
// (RFC 9113 section 5.1, idle): DATA, HEADERS, RST_STREAM or WINDOW_UPDATE on one, or on an
// even id, is a connection PROTOCOL_ERROR.
func TestClientFramesOnIdleStreams(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(rc *rawConn, id uint32)
	}{
		{"DATA", func(rc *rawConn, id uint32) { rc.fr.WriteData(id, false, []byte{0}) }},
		{"HEADERS", func(rc *rawConn, id uint32) {
			rc.writeHeaders(id, false, ":status", "200", "content-type", "application/grpc")
		}},
		{"RST_STREAM", func(rc *rawConn, id uint32) { rc.fr.WriteRSTStream(id, http2.ErrCodeCancel) }},
		{"WINDOW_UPDATE", func(rc *rawConn, id uint32) { rc.fr.WriteWindowUpdate(id, 1) }},
	} {
		for _, offset := range []uint32{1, 2} { // the next odd id, an even id
			t.Run(fmt.Sprintf("%s/+%d", tc.name, offset), func(t *testing.T) {
				p := startRawPeer(t)
				c := clientOfRawPeer(t, p, ClientConfig{})
				s, err := c.Open(testCtx(t), testMethod)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				rc := p.accept(t)
				id := rc.headers(t)
				tc.write(rc, id+offset)
				rc.bw.Flush()
				if code := rc.goAwayCode(t); code != http2.ErrCodeProtocol {
					t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", code)
				}
			})
		}
	}
}

// TestClientTimeoutMeasuredAtHeaders: grpc-timeout is what is left of the deadline when the
// HEADERS go out, after the wait for a stream slot, not when Open was called: it is at most
// what was left when the slot was freed (encodeTimeout rounds up by at most one unit, a
// microsecond for a deadline a minute away).
func TestClientTimeoutMeasuredAtHeaders(t *testing.T) {
	p := startRawPeer(t, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1})
	inOpen := make(chan struct{}, 2) // Header runs inside Open, before the dial and the wait
	c := clientOfRawPeer(t, p, ClientConfig{Header: func(context.Context) (http.Header, error) {
		inOpen <- struct{}{}
		return nil, nil
	}})
	first, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	<-inOpen
	rc := p.accept(t)
	id := rc.headers(t)
	// A PING answered: the client has read our SETTINGS (MAX_CONCURRENT_STREAMS 1), sent first.
	rc.fr.WritePing(false, [8]byte{9})
	rc.bw.Flush()
	rc.next(t, func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
	deadline := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(testCtx(t), deadline)
	defer cancel()
	opened := make(chan *ClientStream, 1)
	go func() {
		s, err := c.Open(ctx, testMethod) // waits for the first stream's slot
		if err != nil {
			t.Error(err)
		}
		opened <- s
	}()
	<-inOpen // the second Open is under way
	released := time.Now()
	rc.respond(id, []byte("done"), codes.OK) // frees the slot
	var timeout string
	rc.next(t, func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		if !ok || h.StreamID == id {
			return false
		}
		for _, hf := range h.RegularFields() {
			if hf.Name == "grpc-timeout" {
				timeout = hf.Value
			}
		}
		return true
	})
	if s := <-opened; s != nil {
		defer s.Close()
	}
	d, err := parseTimeout(timeout)
	if err != nil {
		t.Fatalf("grpc-timeout %q: %v", timeout, err)
	}
	if left := deadline.Sub(released); d > left+time.Microsecond {
		t.Fatalf("grpc-timeout %q (%v) over the %v left when the slot was freed: measured before the wait", timeout, d, left)
	}
}

// TestClientDetectsServerNotReading: a server that stops reading while the client sends (its
// windows open, so only the socket holds the writes back) is found dead by keepalive: the
// ping's timeout runs from before the ping is written, and closing the connection fails the
// blocked write. The stream fails Unavailable, as grpc-go's client reports a keepalive failure.
func TestClientDetectsServerNotReading(t *testing.T) {
	p := startRawPeer(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	c := clientOfRawPeer(t, p, ClientConfig{KeepaliveTime: 100 * time.Millisecond, KeepaliveTimeout: 100 * time.Millisecond})
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := p.accept(t)
	rc.headers(t)
	rc.fr.WriteWindowUpdate(0, 1<<31-1-initialWindow)
	rc.bw.Flush()
	// From here the peer reads nothing.
	msg := make([]byte, 64<<10)
	for {
		err := s.SendMsg(mem.BufferSlice{mem.SliceBuffer(msg)})
		if err == nil {
			continue
		}
		if err != io.EOF { // as grpc-go's SendMsg: the stream's status comes from the receive side
			t.Fatalf("send to a server that stopped reading: %v, want io.EOF", err)
		}
		break
	}
	if _, err := s.RecvMsgHeader(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream on a connection to a server that stopped reading: %v, want Unavailable", err)
	}
}
