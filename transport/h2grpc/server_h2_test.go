package h2grpc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/mem"
)

// rawClient speaks HTTP/2 frame by frame to the server, to send what a well-behaved client
// would not and see every frame the server sends. Reads have a deadline only as a failsafe:
// the tests wait for frames, not for time.
type rawClient struct {
	t    testing.TB
	nc   net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func dialRaw(t testing.TB, path string, preface bool, settings ...http2.Setting) *rawClient {
	t.Helper()
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	c := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	if preface {
		if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		if err := c.fr.WriteSettings(settings...); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// open sends a gRPC request's HEADERS on stream id.
func (c *rawClient) open(id uint32, endStream bool) {
	c.t.Helper()
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", testMethod}, {":authority", "agent"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: endStream, EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
}

// next reads frames until match says yes, and returns that frame; fails at the connection's
// end.
func (c *rawClient) next(what string, match func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return f
		}
	}
}

// waitClosed reads until the server closes the connection and returns the GOAWAY seen, if any.
func (c *rawClient) waitClosed() *http2.GoAwayFrame {
	c.t.Helper()
	var ga *http2.GoAwayFrame
	for {
		f, err := c.fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || (err != nil && !errors.Is(err, http2.ErrFrameTooLarge) && isConnReset(err)) {
			return ga
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatal("the server did not close the connection")
			}
			return ga
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			ga = &http2.GoAwayFrame{FrameHeader: g.FrameHeader, LastStreamID: g.LastStreamID, ErrCode: g.ErrCode}
		}
	}
}

func isConnReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
}

func isRST(id uint32, code http2.ErrCode) func(http2.Frame) bool {
	return func(f http2.Frame) bool {
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == id && r.ErrCode == code
	}
}

// blockHandler holds every stream until the client goes away.
func blockHandler(ss *ServerStream) error {
	<-ss.Context().Done()
	return ss.Context().Err()
}

func TestServerClosesWithoutPreface(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, false)
	if _, err := io.WriteString(c.nc, "GET / HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.nc.Read(make([]byte, 100)); err != io.EOF {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
}

func TestServerClosesSilentConnection(t *testing.T) {
	_, path := startServer(t, ServerConfig{PrefaceTimeout: 50 * time.Millisecond}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, false)
	if n, err := c.nc.Read(make([]byte, 100)); err != io.EOF {
		t.Fatalf("read %d bytes, %v; want the connection closed for want of a preface", n, err)
	}
}

func TestServerFirstFrameMustBeSettings(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, false)
	io.WriteString(c.nc, http2.ClientPreface)
	c.fr.WritePing(false, [8]byte{1})
	if ga := c.waitClosed(); ga == nil || ga.ErrCode != http2.ErrCodeProtocol {
		t.Fatalf("GOAWAY %+v, want PROTOCOL_ERROR", ga)
	}
}

// TestServerFirstFrameSettingsAck: a SETTINGS ACK is not the client's preface SETTINGS (RFC
// 9113 section 3.4), as the client already held of the server's first frame (readFrame).
func TestServerFirstFrameSettingsAck(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, false)
	io.WriteString(c.nc, http2.ClientPreface)
	c.fr.WriteSettingsAck()
	if ga := c.waitClosed(); ga == nil || ga.ErrCode != http2.ErrCodeProtocol {
		t.Fatalf("GOAWAY %+v, want PROTOCOL_ERROR", ga)
	}
}

func TestServerPingAck(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, true)
	data := [8]byte{'a', 'b', 'c', 'd', 1, 2, 3, 4}
	c.fr.WritePing(false, data)
	c.next("PING ack", func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == data
	})
}

// headers sends a header block of fields (name, value pairs) on stream id.
func (c *rawClient) headers(id uint32, endStream bool, fields ...string) {
	c.t.Helper()
	c.hbuf.Reset()
	for i := 0; i < len(fields); i += 2 {
		c.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: endStream, EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
}

// TestServerStreamStates: frames in the wrong stream state get the errors RFC 9113 section
// 5.1 (and 8.1 for trailers) gives them, stream errors leaving the connection up; the codes
// are those x/net/http2's server gives (server.go processData, processHeaders,
// processWindowUpdate, processPriority), which h2spec accepts.
func TestServerStreamStates(t *testing.T) {
	pingOK := func(c *rawClient) {
		c.t.Helper()
		c.fr.WritePing(false, [8]byte{7})
		c.next("PING ack", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
	}
	connErr := func(c *rawClient, want http2.ErrCode) {
		c.t.Helper()
		if ga := c.waitClosed(); ga == nil || ga.ErrCode != want {
			c.t.Fatalf("GOAWAY %+v, want %v", ga, want)
		}
	}
	t.Run("DATA on a stream the client reset", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.open(1, false)
		c.fr.WriteRSTStream(1, http2.ErrCodeCancel)
		c.fr.WriteData(1, false, []byte{0})
		c.next("RST_STREAM STREAM_CLOSED", isRST(1, http2.ErrCodeStreamClosed))
		pingOK(c)
	})
	t.Run("DATA after END_STREAM", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.open(1, true)
		c.fr.WriteData(1, false, []byte{0})
		c.next("RST_STREAM STREAM_CLOSED", isRST(1, http2.ErrCodeStreamClosed))
	})
	t.Run("HEADERS after END_STREAM", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.open(1, true)
		c.headers(1, true, "x-trailer", "1")
		c.next("RST_STREAM STREAM_CLOSED", isRST(1, http2.ErrCodeStreamClosed))
	})
	t.Run("second HEADERS without END_STREAM", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.open(1, false)
		c.headers(1, false, "x-trailer", "1")
		c.next("RST_STREAM PROTOCOL_ERROR", isRST(1, http2.ErrCodeProtocol))
		pingOK(c)
	})
	t.Run("pseudo-header in trailers", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.open(1, false)
		c.headers(1, true, ":method", "POST")
		c.next("RST_STREAM PROTOCOL_ERROR", isRST(1, http2.ErrCodeProtocol))
	})
	t.Run("HEADERS on a closed stream", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.open(3, false)
		c.fr.WriteRSTStream(3, http2.ErrCodeCancel)
		c.open(3, false)
		connErr(c, http2.ErrCodeProtocol)
	})
	t.Run("stream id lower than the last", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.open(5, false)
		c.open(3, false)
		connErr(c, http2.ErrCodeProtocol)
	})
	t.Run("WINDOW_UPDATE on an idle stream", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.fr.WriteWindowUpdate(1, 1)
		connErr(c, http2.ErrCodeProtocol)
	})
	t.Run("WINDOW_UPDATE on a closed stream", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.open(1, false)
		c.fr.WriteRSTStream(1, http2.ErrCodeCancel)
		c.fr.WriteWindowUpdate(1, 1) // the peer may send it before it learns the stream ended
		pingOK(c)
	})
	t.Run("PRIORITY depending on itself", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.fr.WritePriority(3, http2.PriorityParam{StreamDep: 3, Weight: 1})
		c.next("RST_STREAM PROTOCOL_ERROR", isRST(3, http2.ErrCodeProtocol))
		pingOK(c)
	})
	t.Run("HEADERS depending on itself", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.hbuf.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", testMethod}, {"content-type", "application/grpc"}} {
			c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.hbuf.Bytes(), EndHeaders: true, Priority: http2.PriorityParam{StreamDep: 1, Weight: 1}})
		c.next("RST_STREAM PROTOCOL_ERROR", isRST(1, http2.ErrCodeProtocol))
	})
	t.Run("INITIAL_WINDOW_SIZE takes a window past 2^31-1", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		c.open(1, false)
		c.fr.WriteWindowUpdate(1, 1<<31-1-initialWindow) // the stream's send window at 2^31-1
		c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: initialWindow + 1})
		connErr(c, http2.ErrCodeFlowControl) // section 6.9.2
	})
	t.Run("content-length disagrees with DATA", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
		c := dialRaw(t, path, true)
		// Not gRPC: answered at once (415), the body still checked.
		c.headers(1, false, ":method", "POST", ":scheme", "http", ":path", "/", "content-length", "2")
		c.fr.WriteData(1, true, []byte{0})
		c.next("RST_STREAM PROTOCOL_ERROR", isRST(1, http2.ErrCodeProtocol))
		pingOK(c)
	})
}

func TestServerRefusesStreamsOverTheLimit(t *testing.T) {
	_, path := startServer(t, ServerConfig{MaxConcurrentStreams: 1}, map[string]Handler{testMethod: blockHandler})
	c := dialRaw(t, path, true)
	c.next("SETTINGS with MAX_CONCURRENT_STREAMS 1", func(f http2.Frame) bool {
		s, ok := f.(*http2.SettingsFrame)
		if !ok || s.IsAck() {
			return false
		}
		v, ok := s.Value(http2.SettingMaxConcurrentStreams)
		return ok && v == 1
	})
	c.open(1, true) // half-closed (remote): it counts until the handler ends it
	c.open(3, false)
	c.next("RST_STREAM REFUSED_STREAM on stream 3", isRST(3, http2.ErrCodeRefusedStream))
}

func TestServerStreamFlowControlEnforced(t *testing.T) {
	const window = 64 << 10
	_, path := startServer(t, ServerConfig{StreamWindow: window, ConnWindow: 1 << 20}, map[string]Handler{testMethod: blockHandler})
	c := dialRaw(t, path, true)
	c.open(1, false)
	chunk := make([]byte, 16<<10)
	for sent := 0; sent < window; sent += len(chunk) {
		c.fr.WriteData(1, false, chunk)
	}
	c.fr.WriteData(1, false, []byte{1}) // one byte over a window the handler never reads from
	c.next("RST_STREAM FLOW_CONTROL_ERROR", isRST(1, http2.ErrCodeFlowControl))
	// The connection lives on.
	data := [8]byte{9}
	c.fr.WritePing(false, data)
	c.next("PING ack", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
}

// TestServerGrantsPadding: padding is consumed on arrival (RFC 9113 section 6.1: it counts in
// flow control), so the stream's window for it is granted back without the handler reading:
// a peer that pads half the window gets a WINDOW_UPDATE for the stream, as from the
// client (recvWindow, core_recvstream.go). Before the connection core the server only granted
// padding with the handler's next read, and a handler that reads nothing left it owed.
func TestServerGrantsPadding(t *testing.T) {
	const window = 64 << 10
	_, path := startServer(t, ServerConfig{StreamWindow: window, ConnWindow: 1 << 20}, map[string]Handler{testMethod: blockHandler})
	c := dialRaw(t, path, true)
	c.open(1, false)
	pad := make([]byte, 255)
	sent := 0
	for sent < window/2 {
		c.fr.WriteDataPadded(1, false, nil, pad) // 256 bytes of window each, no data
		sent += 1 + len(pad)
	}
	f := c.next("WINDOW_UPDATE for stream 1", func(f http2.Frame) bool {
		wu, ok := f.(*http2.WindowUpdateFrame)
		return ok && wu.StreamID == 1
	}).(*http2.WindowUpdateFrame)
	if int(f.Increment) != sent {
		t.Fatalf("WINDOW_UPDATE of %d for %d bytes of padding", f.Increment, sent)
	}
}

func TestServerWindowOverflowIsAnError(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, true)
	c.fr.WriteWindowUpdate(0, 1<<31-1)
	if ga := c.waitClosed(); ga == nil || ga.ErrCode != http2.ErrCodeFlowControl {
		t.Fatalf("GOAWAY %+v, want FLOW_CONTROL_ERROR", ga)
	}
}

func TestServerBadWindowUpdates(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
	c := dialRaw(t, path, true)
	c.open(1, false)
	c.fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 1, []byte{0, 0, 0, 0}) // increment 0 on a stream
	c.next("RST_STREAM PROTOCOL_ERROR", isRST(1, http2.ErrCodeProtocol))
	c.fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 1}) // 3 bytes long
	if ga := c.waitClosed(); ga == nil || ga.ErrCode != http2.ErrCodeFrameSize {
		t.Fatalf("GOAWAY %+v, want FRAME_SIZE_ERROR", ga)
	}
}

func TestServerFrameTooLarge(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: blockHandler})
	c := dialRaw(t, path, true)
	c.open(1, false)
	c.fr.WriteData(1, false, make([]byte, maxFrameDefault+1)) // we never raised MAX_FRAME_SIZE
	if ga := c.waitClosed(); ga == nil || ga.ErrCode != http2.ErrCodeFrameSize {
		t.Fatalf("GOAWAY %+v, want FRAME_SIZE_ERROR", ga)
	}
}

// TestServerHonoursPeerWindow: with the client's INITIAL_WINDOW_SIZE at 0 no DATA comes; a
// WINDOW_UPDATE lets exactly that much through, and no more comes until the next one (a PING
// answered after that shows the server had the time to send more, and did not).
func TestServerHonoursPeerWindow(t *testing.T) {
	msg := []byte("0123456789")
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		return ss.SendMsg(mem.BufferSlice{mem.SliceBuffer(msg)})
	}})
	c := dialRaw(t, path, true, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.fr.WriteWindowUpdate(0, 1<<20)
	c.open(1, true)
	got := 0
	count := func(f http2.Frame) {
		if d, ok := f.(*http2.DataFrame); ok {
			got += len(d.Data())
		}
	}
	pingAck := func(f http2.Frame) bool {
		count(f)
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck()
	}
	c.fr.WritePing(false, [8]byte{1})
	c.next("PING ack", pingAck)
	if got != 0 {
		t.Fatalf("%d bytes of DATA with a window of 0", got)
	}
	c.fr.WritePriority(1, http2.PriorityParam{Weight: 7}) // accepted on a half-closed (remote) stream
	c.fr.WriteWindowUpdate(1, 7)
	c.next("7 bytes of DATA", func(f http2.Frame) bool {
		count(f)
		return got >= 7
	})
	c.fr.WritePing(false, [8]byte{2})
	c.next("PING ack", pingAck)
	if got != 7 {
		t.Fatalf("%d bytes of DATA with a window of 7", got)
	}
	c.fr.WriteWindowUpdate(1, 100)
	c.next("trailers", func(f http2.Frame) bool {
		count(f)
		h, ok := f.(*http2.MetaHeadersFrame)
		return ok && h.StreamEnded()
	})
	if got != prefixLen+len(msg) {
		t.Fatalf("%d bytes of DATA, want %d", got, prefixLen+len(msg))
	}
}

// TestServerNegativeWindow: a smaller INITIAL_WINDOW_SIZE mid-stream makes the send window
// negative (RFC 9113 section 6.9.2); DATA resumes only once updates bring it above zero.
func TestServerNegativeWindow(t *testing.T) {
	msg := pattern(100<<10, 4)
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		return ss.SendMsg(mem.BufferSlice{mem.SliceBuffer(msg)})
	}})
	c := dialRaw(t, path, true, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 64 << 10})
	c.fr.WriteWindowUpdate(0, 1<<20)
	c.open(1, true)
	got := 0
	count := func(f http2.Frame) {
		if d, ok := f.(*http2.DataFrame); ok {
			got += len(d.Data())
		}
	}
	c.next("the first 64 KiB", func(f http2.Frame) bool { count(f); return got >= 64<<10 })
	// Window 0 now; 16 KiB initial makes it -48 KiB, and 48 KiB of updates bring it to 0.
	c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 16 << 10})
	c.fr.WriteWindowUpdate(1, 48<<10)
	c.fr.WritePing(false, [8]byte{3})
	c.next("PING ack", func(f http2.Frame) bool {
		count(f)
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck()
	})
	if got != 64<<10 {
		t.Fatalf("%d bytes of DATA, want 64 KiB while the window is at or below 0", got)
	}
	c.fr.WriteWindowUpdate(1, 10)
	c.next("10 more bytes", func(f http2.Frame) bool { count(f); return got >= 64<<10+10 })
	c.fr.WritePing(false, [8]byte{4})
	c.next("PING ack", func(f http2.Frame) bool {
		count(f)
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck()
	})
	if got != 64<<10+10 {
		t.Fatalf("%d bytes of DATA, want 64 KiB + 10", got)
	}
}

func TestServerKeepaliveClosesSilentClient(t *testing.T) {
	_, path := startServer(t, ServerConfig{KeepaliveTime: 20 * time.Millisecond, KeepaliveTimeout: 50 * time.Millisecond}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, true)
	c.next("keepalive PING", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && !p.IsAck() })
	c.waitClosed() // not answered: the server closes the connection
}

func TestServerKeepaliveAnswered(t *testing.T) {
	_, path := startServer(t, ServerConfig{KeepaliveTime: 20 * time.Millisecond, KeepaliveTimeout: time.Minute}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, true)
	for i := 0; i < 3; i++ {
		f := c.next("keepalive PING", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && !p.IsAck() })
		c.fr.WritePing(true, f.(*http2.PingFrame).Data)
	}
}

// TestServerPingFlood: grpc-go's server ping policy with its defaults (no stream open, no
// PermitPingWithoutStream: a ping within 2 h of the last is a strike; the third strike ends it):
// PINGs 1-3 are answered, the 4th gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and the
// connection closes (grpc-go http2_server.go handlePing).
func TestServerPingFlood(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, true)
	for i := byte(1); i <= 3; i++ {
		c.fr.WritePing(false, [8]byte{i})
		c.next("PING ack", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() && p.Data[0] == i })
	}
	c.fr.WritePing(false, [8]byte{4})
	var code http2.ErrCode
	var debug string
	c.next("GOAWAY", func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		if ok {
			code, debug = g.ErrCode, string(g.DebugData())
		}
		return ok
	})
	if code != http2.ErrCodeEnhanceYourCalm || debug != "too_many_pings" {
		t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM \"too_many_pings\"", code, debug)
	}
	c.waitClosed()
}

// TestServerPingPolicyPermits: pings no sooner than PingMinTime apart, with streams or
// PermitPingWithoutStream, are no strikes: ten are answered and the connection lives.
func TestServerPingPolicyPermits(t *testing.T) {
	_, path := startServer(t, ServerConfig{PingMinTime: time.Nanosecond, PermitPingWithoutStream: true}, map[string]Handler{testMethod: echoHandler})
	c := dialRaw(t, path, true)
	for i := byte(1); i <= 10; i++ {
		c.fr.WritePing(false, [8]byte{i})
		c.next("PING ack", func(f http2.Frame) bool {
			if g, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("GOAWAY %v after %d pings", g.ErrCode, i)
			}
			p, ok := f.(*http2.PingFrame)
			return ok && p.IsAck() && p.Data[0] == i
		})
	}
}

// TestServerDetectsClientNotReading: a client that stops reading mid-response (its socket
// buffer full, the handler's write blocked holding the writer) is found dead by keepalive:
// the write deadline and the ping timeout, which runs from before the ping is written, end
// the connection and the handler's send fails. Before, the handler stayed blocked.
func TestServerDetectsClientNotReading(t *testing.T) {
	sendErr := make(chan error, 1)
	_, path := startServer(t, ServerConfig{KeepaliveTime: 100 * time.Millisecond, KeepaliveTimeout: 100 * time.Millisecond},
		map[string]Handler{testMethod: func(ss *ServerStream) error {
			msg := make([]byte, 64<<10)
			for {
				if err := ss.SendMsg(mem.BufferSlice{mem.SliceBuffer(msg)}); err != nil {
					sendErr <- err
					return err
				}
			}
		}})
	c := dialRaw(t, path, true, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	c.fr.WriteWindowUpdate(0, 1<<31-1-initialWindow)
	c.open(1, true)
	// Read nothing: the handler fills the socket's buffers and blocks.
	select {
	case err := <-sendErr:
		if err == nil {
			t.Fatal("SendMsg returned nil")
		}
	case <-testCtx(t).Done():
		t.Fatal("the handler's send still blocked on a client that stopped reading")
	}
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, c.nc); err != nil && !isConnReset(err) {
		t.Fatalf("draining the closed connection: %v", err)
	}
}
