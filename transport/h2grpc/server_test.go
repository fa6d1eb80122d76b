package h2grpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/internal/syncbuf"
)

// echoHandler sends back every message and ends OK at the client's half-close.
func echoHandler(ss *ServerStream) error {
	for {
		msg, err := ss.RecvMsg()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		err = ss.SendMsg(msg)
		msg.Free()
		if err != nil {
			return err
		}
	}
}

func openGRPC(t *testing.T, path string, opts ...grpc.DialOption) grpc.ClientStream {
	t.Helper()
	cc := grpcUnixClient(t, path, opts...)
	ctx, cancel := context.WithCancel(testCtx(t))
	t.Cleanup(cancel)
	cs, err := cc.NewStream(ctx, bidi, testMethod)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestServerEchoSizes(t *testing.T) {
	_, path := startServer(t, ServerConfig{MaxRecvMsgBytes: 64 << 20}, map[string]Handler{testMethod: echoHandler})
	cs := openGRPC(t, path)
	for i, size := range echoSizes {
		want := pattern(size, i)
		if err := cs.SendMsg(&want); err != nil {
			t.Fatalf("SendMsg %d bytes: %v", size, err)
		}
		var got []byte
		if err := cs.RecvMsg(&got); err != nil {
			t.Fatalf("RecvMsg %d bytes: %v", size, err)
		}
		bytesEqual(t, got, want)
	}
	cs.CloseSend()
	var got []byte
	if err := cs.RecvMsg(&got); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
}

func TestServerStatusToClient(t *testing.T) {
	for _, tc := range []struct {
		name      string
		handler   Handler
		send      bool
		code      codes.Code
		msg       string
		wantReply bool
	}{
		{name: "trailers-only", handler: func(*ServerStream) error { return status.Error(codes.FailedPrecondition, oddMessage) }, code: codes.FailedPrecondition, msg: oddMessage},
		{name: "after a message", send: true, wantReply: true, handler: func(ss *ServerStream) error {
			msg, err := ss.RecvMsg()
			if err != nil {
				return err
			}
			defer msg.Free()
			if err := ss.SendMsg(msg); err != nil {
				return err
			}
			return status.Error(codes.PermissionDenied, oddMessage)
		}, code: codes.PermissionDenied, msg: oddMessage},
		{name: "plain error", handler: func(*ServerStream) error { return errors.New("boom 100%") }, code: codes.Unknown, msg: "boom 100%"},
		{name: "context error", handler: func(*ServerStream) error { return context.DeadlineExceeded }, code: codes.DeadlineExceeded, msg: context.DeadlineExceeded.Error()},
		{name: "handler returns inside a message", send: true, handler: func(ss *ServerStream) error {
			if err := ss.BeginMsg(10); err != nil {
				return err
			}
			return ss.Write([]byte("12345"))
		}, code: codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: tc.handler})
			cs := openGRPC(t, path)
			if tc.send {
				b := []byte("hello")
				// io.EOF: the server ended the stream first (a handler that does not read
				// may); its status then comes from RecvMsg, as grpc-go documents.
				if err := cs.SendMsg(&b); err != nil && err != io.EOF {
					t.Fatal(err)
				}
			}
			var got []byte
			err := cs.RecvMsg(&got)
			if tc.wantReply {
				if err != nil || string(got) != "hello" {
					t.Fatalf("reply %q, %v", got, err)
				}
				err = cs.RecvMsg(&got)
			}
			st := status.Convert(err)
			if st.Code() != tc.code || (tc.msg != "" && st.Message() != tc.msg) {
				t.Fatalf("status %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
		})
	}
}

func TestServerUnknownMethod(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
	cc := grpcUnixClient(t, path)
	for method, want := range map[string]string{
		"/test.Nope/Stream": "unknown service test.Nope",
		"/test.Echo/Nope":   "unknown method Nope for service test.Echo",
	} {
		cs, err := cc.NewStream(testCtx(t), bidi, method)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		err = cs.RecvMsg(&got)
		if st := status.Convert(err); st.Code() != codes.Unimplemented || st.Message() != want {
			t.Errorf("%s: %v %q, want Unimplemented %q", method, st.Code(), st.Message(), want)
		}
	}
}

func TestServerPiecesMakeOneMessage(t *testing.T) {
	const size, piece = 10 << 20, 16 << 10
	want := pattern(size, 3)
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		if err := ss.BeginMsg(size); err != nil {
			return err
		}
		for off := 0; off < size; off += piece {
			if err := ss.Write(want[off:min(off+piece, size)]); err != nil {
				return err
			}
		}
		if err := ss.Write([]byte{0}); status.Code(err) != codes.Internal {
			return status.Errorf(codes.DataLoss, "Write after the message's end: %v, want Internal", err)
		}
		return ss.SendMsg(mem.BufferSlice{mem.SliceBuffer([]byte("next"))})
	}})
	cs := openGRPC(t, path)
	var got []byte
	if err := cs.RecvMsg(&got); err != nil {
		t.Fatal(err)
	}
	bytesEqual(t, got, want)
	if err := cs.RecvMsg(&got); err != nil || string(got) != "next" {
		t.Fatalf("second message %q, %v", got, err)
	}
	if err := cs.RecvMsg(&got); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}

// TestServerWriteBuffersMakeOneMessage: batches of pieces of varied sizes (WriteBuffers, as the
// proxy forwards what piled up while it wrote) make one message, byte for byte; a batch past the
// message's end is refused whole.
func TestServerWriteBuffersMakeOneMessage(t *testing.T) {
	const size = 3<<20 + 12345
	want := pattern(size, 7)
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		if err := ss.BeginMsg(size); err != nil {
			return err
		}
		for off, batch := 0, 1; off < size; batch = batch%7 + 1 {
			var ps [][]byte
			for range batch {
				n := min(1000*batch+16<<10, size-off)
				ps = append(ps, want[off:off+n])
				if off += n; off == size {
					break
				}
			}
			if err := ss.WriteBuffers(ps); err != nil {
				return err
			}
		}
		if err := ss.WriteBuffers([][]byte{{0}, {1}}); status.Code(err) != codes.Internal {
			return status.Errorf(codes.DataLoss, "WriteBuffers after the message's end: %v, want Internal", err)
		}
		return ss.SendMsg(mem.BufferSlice{mem.SliceBuffer([]byte("next"))})
	}})
	cs := openGRPC(t, path)
	var got []byte
	if err := cs.RecvMsg(&got); err != nil {
		t.Fatal(err)
	}
	bytesEqual(t, got, want)
	if err := cs.RecvMsg(&got); err != nil || string(got) != "next" {
		t.Fatalf("second message %q, %v", got, err)
	}
}

// TestServerWriteBlocksWhileClientDoesNotRead proves what bounds the proxy's memory: Write
// (and SendMsg) do not return while the client does not read, and resume when it reads.
func TestServerWriteBlocksWhileClientDoesNotRead(t *testing.T) {
	const size, piece = 10 << 20, 16 << 10
	want := pattern(size, 5)
	var written atomic.Int64
	sendMsgDone := make(chan struct{})
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		if err := ss.BeginMsg(size); err != nil {
			return err
		}
		for off := 0; off < size; off += piece {
			if err := ss.Write(want[off:min(off+piece, size)]); err != nil {
				return err
			}
			written.Add(piece)
		}
		err := ss.SendMsg(mem.BufferSlice{mem.SliceBuffer(want)})
		close(sendMsgDone)
		return err
	}})
	// Fixed 64 KiB windows (no BDP estimation), so only the windows and the socket buffers
	// hold what the client has not read. The client reaches the server through a windowTap
	// (hungpeer_test.go), which shows when the server has sent all the window the client
	// granted, and by a PING answered after that, that the client granted nothing more.
	tl, err := net.Listen("unix", t.TempDir()+"/tap.sock")
	if err != nil {
		t.Fatal(err)
	}
	tap := startWindowTap(t, tl, func() (net.Conn, error) { return net.Dial("unix", path) })
	cs := openGRPC(t, tl.Addr().String(), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))

	ctx := testCtx(t)
	if err := tap.awaitStall(ctx); err != nil {
		t.Fatal(err)
	}
	w := written.Load()
	select {
	case <-sendMsgDone:
		t.Fatalf("SendMsg returned while the client read nothing (%d bytes written; %s)", w, tap)
	default:
	}
	if w >= size || w > 4<<20 {
		t.Fatalf("%d bytes written while the client read nothing: Write does not wait for the reader", w)
	}
	t.Logf("Write stalled after %d KiB while the client read nothing", w>>10)
	var got []byte
	if err := cs.RecvMsg(&got); err != nil {
		t.Fatal(err)
	}
	bytesEqual(t, got, want)

	// The same for a whole message: SendMsg does not return before the client reads it.
	if err := tap.awaitStall(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sendMsgDone:
		t.Fatal("SendMsg of 10 MB returned while the client read nothing")
	default:
	}
	if err := cs.RecvMsg(&got); err != nil {
		t.Fatal(err)
	}
	bytesEqual(t, got, want)
	<-sendMsgDone
}

func TestServerClientCancelEndsContext(t *testing.T) {
	ended := make(chan error, 1)
	started := make(chan struct{})
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		close(started)
		<-ss.Context().Done()
		var err error
		for err == nil { // the message sent may still be read; then the end
			var msg mem.BufferSlice
			msg, err = ss.RecvMsg()
			msg.Free()
		}
		ended <- err
		return ss.Context().Err()
	}})
	cc := grpcUnixClient(t, path)
	ctx, cancel := context.WithCancel(testCtx(t))
	cs, err := cc.NewStream(ctx, bidi, testMethod)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte("x")
	cs.SendMsg(&b)
	<-started
	cancel()
	if err := <-ended; status.Code(err) != codes.Canceled {
		t.Fatalf("RecvMsg after the client cancelled: %v, want Canceled", err)
	}
}

func TestServerStopWaitsForHandlers(t *testing.T) {
	path := t.TempDir() + "/s.sock"
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var returned atomic.Bool
	started := make(chan struct{})
	s := NewServer(t.Context(), ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		close(started)
		_, err := ss.RecvMsg() // the client sends nothing: only Stop ends this
		time.Sleep(50 * time.Millisecond)
		returned.Store(true)
		return err
	}})
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(l) }()
	cs := openGRPC(t, path)
	b := []byte{}
	if err := cs.SendMsg(&b); err != nil { // makes the stream reach the server
		t.Fatal(err)
	}
	<-started
	s.Stop()
	if !returned.Load() {
		t.Fatal("Stop returned before the handler")
	}
	if err := <-errc; err != nil {
		t.Fatalf("Serve after Stop: %v, want nil", err)
	}
	var got []byte
	if err := cs.RecvMsg(&got); status.Code(err) != codes.Unavailable {
		t.Fatalf("client after Stop: %v, want Unavailable", err)
	}
	// Serve after Stop returns at once.
	l2, err := net.Listen("unix", path+"2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(l2); err != nil {
		t.Fatalf("Serve after Stop: %v", err)
	}
}

func TestServerConfigRefused(t *testing.T) {
	for _, cfg := range []ServerConfig{
		{StreamWindow: 1000},
		{StreamWindow: 1 << 20, ConnWindow: 100 << 10},
		{MaxRecvMsgBytes: -1},
		{KeepaliveTime: -time.Second},
		{PrefaceTimeout: -time.Second},
	} {
		l, err := net.Listen("unix", t.TempDir()+"/s.sock")
		if err != nil {
			t.Fatal(err)
		}
		s := NewServer(t.Context(), cfg, nil)
		if err := s.Serve(l); err == nil {
			t.Errorf("%+v: Serve accepted it", cfg)
		}
		s.Stop()
	}
}

// rawH2C is a plain net/http HTTP/2 client of a Unix socket, to send what grpc-go would not.
func rawH2C(t *testing.T, path string) *http.Transport {
	t.Helper()
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Protocols: protos,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

type rawResult struct {
	httpStatus int
	header     http.Header
	body       []byte
	grpcStatus string
	grpcMsg    string
}

func rawPost(t *testing.T, tr *http.Transport, ct string, hdr map[string]string, body []byte) rawResult {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, "http://agent"+testMethod, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := rawResult{httpStatus: resp.StatusCode, header: resp.Header, body: b}
	src := resp.Trailer
	if src.Get("Grpc-Status") == "" {
		src = resp.Header
	}
	r.grpcStatus, r.grpcMsg = src.Get("Grpc-Status"), src.Get("Grpc-Message")
	return r
}

func prefixed(flags byte, size int, body []byte) []byte {
	return append([]byte{flags, byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}, body...)
}

func TestServerRefusesMalformedRequests(t *testing.T) {
	_, path := startServer(t, ServerConfig{MaxRecvMsgBytes: 1000}, map[string]Handler{testMethod: echoHandler})
	tr := rawH2C(t, path)
	code := func(c codes.Code) string { return strconv.Itoa(int(c)) }
	for _, tc := range []struct {
		name       string
		ct         string
		hdr        map[string]string
		body       []byte
		httpStatus int
		grpcStatus string
	}{
		{name: "not gRPC", ct: "application/json", body: nil, httpStatus: 415, grpcStatus: code(codes.InvalidArgument)},
		{name: "compressed, no encoding", ct: "application/grpc", body: prefixed(1, 1, []byte("x")), httpStatus: 200, grpcStatus: code(codes.Internal)},
		{name: "compressed, gzip", ct: "application/grpc", hdr: map[string]string{"grpc-encoding": "gzip"}, body: prefixed(1, 1, []byte("x")), httpStatus: 200, grpcStatus: code(codes.Unimplemented)},
		{name: "unknown flags", ct: "application/grpc", body: prefixed(7, 1, []byte("x")), httpStatus: 200, grpcStatus: code(codes.Internal)},
		{name: "truncated prefix", ct: "application/grpc", body: []byte{0, 0, 0}, httpStatus: 200, grpcStatus: code(codes.Internal)},
		{name: "truncated body", ct: "application/grpc", body: prefixed(0, 100, []byte("0123456789")), httpStatus: 200, grpcStatus: code(codes.Internal)},
		{name: "over the limit", ct: "application/grpc", body: prefixed(0, 1001, make([]byte, 1001)), httpStatus: 200, grpcStatus: code(codes.ResourceExhausted)},
		{name: "at the limit", ct: "application/grpc+proto", body: prefixed(0, 1000, make([]byte, 1000)), httpStatus: 200, grpcStatus: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rawPost(t, tr, tc.ct, tc.hdr, tc.body)
			if r.httpStatus != tc.httpStatus || r.grpcStatus != tc.grpcStatus {
				t.Fatalf("HTTP %d grpc-status %q (%q), want HTTP %d grpc-status %q", r.httpStatus, r.grpcStatus, r.grpcMsg, tc.httpStatus, tc.grpcStatus)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/grpc" {
				t.Errorf("content-type %q", ct)
			}
			if _, ok := r.header["Date"]; ok {
				t.Error("response has a date header")
			}
			if tc.grpcStatus == "0" && len(r.body) != len(tc.body) {
				t.Errorf("echo of %d bytes, want %d", len(r.body), len(tc.body))
			}
		})
	}
	// The server lives on: a good stream works after all of those.
	cs := openGRPC(t, path)
	b := []byte("still here")
	if err := cs.SendMsg(&b); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := cs.RecvMsg(&got); err != nil || string(got) != "still here" {
		t.Fatalf("%q, %v", got, err)
	}
}

func TestServerCompressedFromGRPCGo(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
	cs := openGRPC(t, path, grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)))
	b := bytes.Repeat([]byte("compress me "), 100)
	if err := cs.SendMsg(&b); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := cs.RecvMsg(&got); status.Code(err) != codes.Unimplemented {
		t.Fatalf("%v, want Unimplemented", err)
	}
}

func TestServerGRPCTimeout(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		<-ss.Context().Done()
		return ss.Context().Err()
	}})
	cc := grpcUnixClient(t, path)
	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	cs, err := cc.NewStream(ctx, bidi, testMethod)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := cs.RecvMsg(&got); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("%v, want DeadlineExceeded", err)
	}
}

func TestParseTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{"1H": time.Hour, "2M": 2 * time.Minute, "3S": 3 * time.Second, "4m": 4 * time.Millisecond, "5u": 5 * time.Microsecond, "99999999n": 99999999, "99999999H": 1<<63 - 1} {
		if got, err := parseTimeout(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1", "S", "1x", "123456789S", "-1S", "1.5S"} {
		if _, err := parseTimeout(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// TestClientDialsUnixSocket: with Dial set, the client reaches a server on a Unix socket (as a
// test client of the xDS proxy's socket does); Address stays the :authority.
func TestClientDialsUnixSocket(t *testing.T) {
	_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
	var dials atomic.Int32
	c, err := NewClient(ClientConfig{Address: "localhost:15010", Dial: func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Open(testCtx(t), testMethod)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []byte("over a unix socket")
	if err := s.SendMsg(mem.BufferSlice{mem.SliceBuffer(want)}); err != nil {
		t.Fatal(err)
	}
	n, err := s.RecvMsgHeader()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || dials.Load() != 1 {
		t.Fatalf("got %q after %d dials", got, dials.Load())
	}
}

// TestServerMaxConcurrentStreams: with a limit of 1, a second stream of the same connection
// waits (grpc-go's client holds it) until the first ends.
func TestServerMaxConcurrentStreams(t *testing.T) {
	var active, most atomic.Int32
	started := make(chan struct{}, 2)
	_, path := startServer(t, ServerConfig{MaxConcurrentStreams: 1}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		n := active.Add(1)
		defer active.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		started <- struct{}{}
		return echoHandler(ss)
	}})
	cc := grpcUnixClient(t, path)
	open := func() grpc.ClientStream {
		cs, err := cc.NewStream(testCtx(t), bidi, testMethod)
		if err != nil {
			t.Error(err)
			return nil
		}
		b := []byte("x")
		if err := cs.SendMsg(&b); err != nil {
			t.Error(err)
		}
		return cs
	}
	first := open()
	<-started
	second := make(chan grpc.ClientStream, 1)
	go func() { second <- open() }()
	// Unwired, the second handler would start at once.
	select {
	case <-started:
		t.Fatal("a second stream started while the first was open")
	case <-time.After(300 * time.Millisecond):
	}
	first.CloseSend()
	var got []byte
	for first.RecvMsg(&got) == nil {
	}
	<-started // the second stream runs once the first has ended
	s2 := <-second
	s2.CloseSend()
	for s2.RecvMsg(&got) == nil {
	}
	if most.Load() != 1 {
		t.Fatalf("%d streams at once, want 1", most.Load())
	}
}

// TestServerHandlerPanic: a handler's panic ends that stream with Internal (as net/http's server
// recovers it); the server keeps serving and Stop still accounts for the handler.
// The panic goes to the server's Logger with its stack, and nowhere else.
func TestServerHandlerPanic(t *testing.T) {
	var logged syncbuf.Buffer
	_, path := startServer(t, ServerConfig{Logger: slog.New(slog.NewTextHandler(&logged, nil))}, map[string]Handler{
		testMethod: echoHandler,
		"/test.Echo/Panic": func(*ServerStream) error {
			panic("handler bug")
		},
	})
	cc := grpcUnixClient(t, path)
	cs, err := cc.NewStream(testCtx(t), bidi, "/test.Echo/Panic")
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := cs.RecvMsg(&got); status.Code(err) == codes.OK {
		t.Fatalf("panicking handler: %v", err)
	}
	ok := openGRPC(t, path)
	b := []byte("after")
	if err := ok.SendMsg(&b); err != nil {
		t.Fatal(err)
	}
	if err := ok.RecvMsg(&got); err != nil || string(got) != "after" {
		t.Fatalf("%q, %v", got, err)
	}
	// The stream's trailers go out from runHandler's deferred recover after it logged, so the
	// log line is complete once the client saw the status.
	out := logged.String()
	for _, want := range []string{"level=ERROR", "panic serving", "method=/test.Echo/Panic", "panic=\"handler bug\"", "runHandler"} {
		if !strings.Contains(out, want) {
			t.Errorf("panic log lacks %q:\n%s", want, out)
		}
	}
}

// TestCutThroughProxy runs the proxy's shape end to end for correctness: a grpc-go client on
// a Unix socket -> this package's Server, whose handler forwards through this package's
// Client over TLS to a grpc-go echo, responses cut through in pieces (the benchmarks' middle).
func TestCutThroughProxy(t *testing.T) {
	upstream, tc := benchEcho(t)
	path := h2grpcMiddle(t, upstream, tc)
	cs := openGRPC(t, path)
	for i, size := range echoSizes {
		want := pattern(size, i)
		if err := cs.SendMsg(&want); err != nil {
			t.Fatalf("SendMsg %d bytes: %v", size, err)
		}
		var got []byte
		if err := cs.RecvMsg(&got); err != nil {
			t.Fatalf("RecvMsg %d bytes: %v", size, err)
		}
		bytesEqual(t, got, want)
	}
	cs.CloseSend()
	var got []byte
	if err := cs.RecvMsg(&got); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}
