package h2grpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// serverBufferSize is the size of a server connection's read and write buffers: a read system
// call takes several 16 KiB frames when they are waiting, and a write sends several.
const serverBufferSize = 64 << 10

// initialWindow is HTTP/2's initial window for both directions before SETTINGS (RFC 9113
// section 6.9.2), and maxFrameDefault its initial SETTINGS_MAX_FRAME_SIZE (section 6.5.2).
const (
	initialWindow   = 65535
	maxFrameDefault = 16384
)

// prefaceTimeout bounds the wait for a new connection's client preface, as Go's HTTP/2 server
// does (x/net/http2 server.go prefaceTimeout).
var prefaceTimeout = 10 * time.Second

// errConnClosed ends the streams of a connection that is gone.
var errConnClosed = errors.New("connection closed")

// errStreamReset ends the receive side of a stream reset by either end.
var errStreamReset = errors.New("stream reset")

// serverConn is one HTTP/2 connection of a Server: one goroutine reads its frames (serve),
// one per stream runs the handler, and every frame written goes through the writer (wmu).
type serverConn struct {
	s      *Server
	nc     net.Conn
	fr     *http2.Framer
	br     *bufio.Reader
	ctx    context.Context // streams' contexts derive from it; cancelled when the connection ends
	cancel context.CancelFunc

	// writer (server_write.go)
	wmu          sync.Mutex
	waiters      atomic.Int32 // goroutines waiting for wmu
	bw           *bufio.Writer
	henc         *hpack.Encoder // writes into hbuf
	hbuf         bytes.Buffer
	dataHdr      [9]byte
	werr         error         // first write error; under wmu
	peerMaxFrame atomic.Uint32 // the peer's SETTINGS_MAX_FRAME_SIZE

	mu          sync.Mutex // guards the fields below and every stream's send window
	cond        sync.Cond  // on mu: a send window grew, or a stream or the connection ended
	streams     map[uint32]*ServerStream
	closed      bool
	connSend    int64 // bytes we may still send on the connection
	peerInitWin int64 // the peer's SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window

	// owned by the reading goroutine
	lastStream  uint32 // the highest stream the peer opened
	connRecv    int64  // bytes the peer may still send on the connection
	connUnacked int64  // bytes received and not yet granted back
	goingAway   bool   // the peer sent GOAWAY
	wuBuf       [4]byte

	handlers  sync.WaitGroup // handler goroutines
	keepalive sync.WaitGroup // the pinging goroutine
	activity  atomic.Bool    // a frame arrived since the keepalive goroutine last looked
	pingAck   chan struct{}  // the reader -> keepalive: our PING was answered
}

func newServerConn(s *Server, nc net.Conn) *serverConn {
	sc := &serverConn{
		s:           s,
		nc:          nc,
		br:          bufio.NewReaderSize(nc, serverBufferSize),
		bw:          bufio.NewWriterSize(nc, serverBufferSize),
		streams:     map[uint32]*ServerStream{},
		connSend:    initialWindow,
		peerInitWin: initialWindow,
		connRecv:    int64(s.cfg.ConnWindow),
		pingAck:     make(chan struct{}, 1),
	}
	sc.ctx, sc.cancel = context.WithCancel(s.ctx)
	sc.cond.L = &sc.mu
	sc.fr = http2.NewFramer(sc.bw, sc.br)
	sc.fr.SetReuseFrames()
	sc.fr.SetMaxReadFrameSize(maxFrameDefault)
	sc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	sc.fr.MaxHeaderListSize = maxHeaderList
	sc.henc = hpack.NewEncoder(&sc.hbuf)
	sc.peerMaxFrame.Store(maxFrameDefault)
	return sc
}

// maxHeaderList is the request header list size the server accepts (advertised as
// SETTINGS_MAX_HEADER_LIST_SIZE); Go's HTTP/2 server allows 1 MiB by default.
const maxHeaderList = 1 << 20

// serve runs the connection until it ends, then ends every stream and waits for its handlers.
func (sc *serverConn) serve() {
	defer sc.shutdown()
	// A client has prefaceTimeout to open with the preface (Go's HTTP/2 server allows 10 s).
	var preface [len(http2.ClientPreface)]byte
	sc.nc.SetReadDeadline(time.Now().Add(prefaceTimeout))
	if _, err := io.ReadFull(sc.br, preface[:]); err != nil || string(preface[:]) != http2.ClientPreface {
		return // not HTTP/2 with prior knowledge
	}
	sc.nc.SetReadDeadline(time.Time{})
	sc.lockWrite()
	sc.noteWrite(sc.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(sc.s.cfg.MaxConcurrentStreams)},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(sc.s.cfg.StreamWindow)},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderList},
	))
	if grow := sc.s.cfg.ConnWindow - initialWindow; grow > 0 {
		sc.noteWrite(sc.fr.WriteWindowUpdate(0, uint32(grow)))
	}
	if sc.unlockWrite() != nil {
		return
	}
	if sc.s.cfg.KeepaliveTime > 0 {
		sc.keepalive.Add(1)
		go sc.ping()
	}
	for first := true; ; first = false {
		fh, err := sc.fr.ReadFrameHeader()
		var f http2.Frame
		switch {
		case err != nil:
		case first && fh.Type != http2.FrameSettings:
			sc.goAway(http2.ErrCodeProtocol) // RFC 9113 section 3.4: SETTINGS comes first
			return
		case fh.Type == http2.FrameWindowUpdate:
			err = sc.readWindowUpdate(fh)
		case fh.Type == http2.FrameData:
			err = sc.readData(fh)
		default:
			f, err = sc.fr.ReadFrameForHeader(fh)
		}
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				sc.streamFailed(se.StreamID, se.Code)
				continue
			}
			var ce http2.ConnectionError
			switch {
			case errors.As(err, &ce):
				sc.goAway(http2.ErrCode(ce))
			case errors.Is(err, http2.ErrFrameTooLarge):
				sc.goAway(http2.ErrCodeFrameSize) // over our SETTINGS_MAX_FRAME_SIZE (section 4.2)
			}
			return
		}
		sc.activity.Store(true)
		if f == nil {
			continue
		}
		if code, ok := sc.handle(f); !ok {
			sc.goAway(code)
			return
		}
	}
}

// readWindowUpdate reads and applies a WINDOW_UPDATE frame's payload itself: x/net's Framer
// allocates every WINDOW_UPDATE frame it parses (it reuses only DATA frames), and a peer
// sends one per quarter window. Errors as RFC 9113 section 6.9 says, as the Framer would.
func (sc *serverConn) readWindowUpdate(fh http2.FrameHeader) error {
	if fh.Length != 4 {
		return http2.ConnectionError(http2.ErrCodeFrameSize)
	}
	if _, err := io.ReadFull(sc.br, sc.wuBuf[:]); err != nil {
		return err
	}
	inc := binary.BigEndian.Uint32(sc.wuBuf[:]) & 0x7fffffff
	if inc == 0 {
		if fh.StreamID == 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return http2.StreamError{StreamID: fh.StreamID, Code: http2.ErrCodeProtocol}
	}
	if code, ok := sc.onWindowUpdate(fh.StreamID, inc); !ok {
		return http2.ConnectionError(code)
	}
	return nil
}

// shutdown ends the connection: closes it, ends every stream, waits for the handlers.
func (sc *serverConn) shutdown() {
	sc.nc.Close()
	sc.cancel()
	sc.mu.Lock()
	sc.closed = true
	open := make([]*ServerStream, 0, len(sc.streams))
	for _, s := range sc.streams {
		open = append(open, s)
	}
	sc.cond.Broadcast()
	sc.mu.Unlock()
	for _, s := range open {
		s.rb.fail(errConnClosed)
	}
	sc.handlers.Wait()
	sc.keepalive.Wait()
}

// goAway tells the peer the connection ends for a protocol error; the caller then closes it.
// The write has a deadline: a peer that does not read must not hold the reader.
func (sc *serverConn) goAway(code http2.ErrCode) {
	sc.nc.SetWriteDeadline(time.Now().Add(time.Second))
	sc.lockWrite()
	sc.noteWrite(sc.fr.WriteGoAway(sc.lastStream, code, nil))
	sc.unlockWrite()
}

// handle acts on one frame; a connection error returns its code and false.
func (sc *serverConn) handle(f http2.Frame) (http2.ErrCode, bool) {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return sc.onHeaders(f)
	case *http2.WindowUpdateFrame: // read by readWindowUpdate; kept for completeness
		return sc.onWindowUpdate(f.StreamID, f.Increment)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return 0, true
		}
		return sc.onSettings(f)
	case *http2.PingFrame:
		if f.IsAck() {
			select {
			case sc.pingAck <- struct{}{}:
			default:
			}
			return 0, true
		}
		sc.lockWrite()
		sc.noteWrite(sc.fr.WritePing(true, f.Data))
		sc.unlockWrite()
	case *http2.RSTStreamFrame:
		if f.StreamID > sc.lastStream {
			return http2.ErrCodeProtocol, false // RST_STREAM on an idle stream (section 6.4)
		}
		sc.endStream(f.StreamID)
	case *http2.GoAwayFrame:
		// The client opens no more streams; those open run to their end.
		sc.goingAway = true
	case *http2.PushPromiseFrame:
		return http2.ErrCodeProtocol, false // a client cannot push (section 8.4)
	}
	// PRIORITY and unknown frame types are ignored (sections 5.3.2, 5.5).
	return 0, true
}

func (sc *serverConn) stream(id uint32) *ServerStream {
	sc.mu.Lock()
	s := sc.streams[id]
	sc.mu.Unlock()
	return s
}

// streamFailed resets a stream for an error of the peer's and ends it for its handler.
func (sc *serverConn) streamFailed(id uint32, code http2.ErrCode) {
	if id > sc.lastStream && id%2 == 1 {
		sc.lastStream = id
	}
	sc.writeReset(id, code)
	sc.endStream(id)
}

// endStream ends a stream that was reset (by either side): its context is cancelled and its
// reads and writes fail; its handler then returns and writes nothing more.
func (sc *serverConn) endStream(id uint32) {
	sc.mu.Lock()
	s := sc.streams[id]
	if s != nil {
		s.reset = true
		sc.cond.Broadcast()
	}
	sc.mu.Unlock()
	if s != nil {
		s.rb.fail(errStreamReset)
		s.cancel()
	}
}

// readData reads a DATA frame's payload itself, straight from the connection's read buffer
// into a pooled buffer the stream's reader takes: one copy (x/net's Framer would first copy
// it into its own frame buffer). Padding is checked and skipped, and counts in flow control.
func (sc *serverConn) readData(fh http2.FrameHeader) error {
	id, flen := fh.StreamID, int64(fh.Length)
	if id == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol) // section 6.1
	}
	size, pad := int(fh.Length), 0
	if fh.Flags.Has(http2.FlagDataPadded) {
		b, err := sc.br.ReadByte()
		if err != nil {
			return err
		}
		pad = int(b)
		if size == 0 || pad >= size {
			return http2.ConnectionError(http2.ErrCodeProtocol) // section 6.1: padding too long
		}
		size -= 1 + pad
	}
	// Section 6.9: the connection's window counts every DATA frame, for any stream.
	if flen > sc.connRecv {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	sc.connRecv -= flen
	sc.connUnacked += flen
	if sc.connUnacked >= int64(sc.s.cfg.ConnWindow)/4 {
		sc.writeWindowUpdate(0, sc.connUnacked)
		sc.connRecv += sc.connUnacked
		sc.connUnacked = 0
	}
	s := sc.stream(id)
	var failed http2.ErrCode
	take := false
	switch {
	case s == nil && id > sc.lastStream:
		return http2.ConnectionError(http2.ErrCodeProtocol) // DATA on an idle stream (section 5.1)
	case s == nil:
		// A stream we ended: its frames may still be in flight.
	case s.rb.ended():
		failed = http2.ErrCodeStreamClosed // DATA after END_STREAM (section 5.1)
	default:
		var ok bool
		if take, ok = s.rb.reserve(flen, size); !ok {
			failed = http2.ErrCodeFlowControl
		}
	}
	if take {
		bp := mem.DefaultBufferPool().Get(size)
		if _, err := io.ReadFull(sc.br, *bp); err != nil {
			mem.DefaultBufferPool().Put(bp)
			return err
		}
		s.rb.add(bp)
	} else if _, err := sc.br.Discard(size); err != nil {
		return err
	}
	if _, err := sc.br.Discard(pad); err != nil {
		return err
	}
	switch {
	case failed != 0:
		sc.streamFailed(id, failed)
	case s != nil && fh.Flags.Has(http2.FlagDataEndStream):
		s.rb.end()
	}
	return nil
}

func (sc *serverConn) onWindowUpdate(id, increment uint32) (http2.ErrCode, bool) {
	inc := int64(increment)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if id == 0 {
		if sc.connSend+inc > math.MaxInt32 {
			return http2.ErrCodeFlowControl, false // section 6.9.1
		}
		sc.connSend += inc
		sc.cond.Broadcast()
		return 0, true
	}
	s := sc.streams[id]
	if s == nil {
		return 0, true
	}
	if s.sendWin+inc > math.MaxInt32 {
		sc.mu.Unlock()
		sc.streamFailed(id, http2.ErrCodeFlowControl)
		sc.mu.Lock()
		return 0, true
	}
	s.sendWin += inc
	sc.cond.Broadcast()
	return 0, true
}

func (sc *serverConn) onSettings(f *http2.SettingsFrame) (http2.ErrCode, bool) {
	var code http2.ErrCode
	ok := true
	tableSize, hasTable := uint32(0), false
	_ = f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				code, ok = http2.ErrCode(ce), false
			} else {
				code, ok = http2.ErrCodeProtocol, false
			}
			return err
		}
		switch st.ID {
		case http2.SettingInitialWindowSize:
			// Section 6.9.2: the change applies to every open stream's send window, which
			// may become negative.
			sc.mu.Lock()
			delta := int64(st.Val) - sc.peerInitWin
			sc.peerInitWin = int64(st.Val)
			for _, s := range sc.streams {
				s.sendWin += delta
			}
			sc.cond.Broadcast()
			sc.mu.Unlock()
		case http2.SettingMaxFrameSize:
			sc.peerMaxFrame.Store(st.Val)
		case http2.SettingHeaderTableSize:
			tableSize, hasTable = st.Val, true
		}
		// MAX_CONCURRENT_STREAMS limits the streams we open (none); ENABLE_PUSH, MAX_HEADER_LIST_SIZE
		// and unknown settings concern nothing we send.
		return nil
	})
	if !ok {
		return code, false
	}
	sc.lockWrite()
	if hasTable {
		sc.henc.SetMaxDynamicTableSizeLimit(tableSize)
	}
	sc.noteWrite(sc.fr.WriteSettingsAck())
	sc.unlockWrite()
	return 0, true
}

// onHeaders opens a stream (or ends one, with trailers).
func (sc *serverConn) onHeaders(f *http2.MetaHeadersFrame) (http2.ErrCode, bool) {
	id := f.StreamID
	if s := sc.stream(id); s != nil {
		// Trailers: they must end the stream (section 8.1).
		if !f.StreamEnded() || s.rb.ended() {
			sc.streamFailed(id, http2.ErrCodeProtocol)
			return 0, true
		}
		s.rb.end()
		return 0, true
	}
	if id%2 == 0 {
		return http2.ErrCodeProtocol, false // clients open odd streams (section 5.1.1)
	}
	if id <= sc.lastStream {
		return 0, true // a stream that we ended
	}
	sc.lastStream = id
	ended := f.StreamEnded()
	sc.mu.Lock()
	open := len(sc.streams)
	sc.mu.Unlock()
	if sc.goingAway || open >= sc.s.cfg.MaxConcurrentStreams {
		sc.writeReset(id, http2.ErrCodeRefusedStream)
		return 0, true
	}
	if f.Truncated {
		sc.writeEarlyAbort(id, http.StatusRequestHeaderFieldsTooLarge, status.New(codes.Internal, "h2grpc: request headers over the size limit"), ended)
		return 0, true
	}
	method, path := f.PseudoValue("method"), f.PseudoValue("path")
	if method == "" || path == "" || f.PseudoValue("scheme") == "" {
		sc.writeReset(id, http2.ErrCodeProtocol) // section 8.3.1: mandatory pseudo-headers
		return 0, true
	}
	var ct, timeout, encoding string
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "content-type":
			ct = hf.Value
		case "grpc-timeout":
			timeout = hf.Value
		case "grpc-encoding":
			encoding = hf.Value
		case "te":
			if hf.Value != "trailers" {
				sc.writeReset(id, http2.ErrCodeProtocol) // section 8.2.2
				return 0, true
			}
		case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
			sc.writeReset(id, http2.ErrCodeProtocol) // section 8.2.2: connection-specific
			return 0, true
		}
	}
	// Checks in grpc-go's order and wording (internal/transport/http2_server.go
	// operateHeaders): content-type (415), then method (405), then the route.
	if !isGRPCContentType(ct) {
		sc.writeEarlyAbort(id, http.StatusUnsupportedMediaType, status.Newf(codes.InvalidArgument, "invalid gRPC request content-type %q", ct), ended)
		return 0, true
	}
	if method != http.MethodPost {
		sc.writeEarlyAbort(id, http.StatusMethodNotAllowed, status.Newf(codes.Internal, "Received a HEADERS frame with :method %q which should be POST", method), ended)
		return 0, true
	}
	h, ok := sc.s.routes[strings.SplitN(path, "?", 2)[0]]
	if !ok {
		sc.writeEarlyAbort(id, http.StatusOK, unknownMethod(path, sc.s.routes), ended)
		return 0, true
	}
	var d time.Duration
	if timeout != "" {
		var err error
		if d, err = parseTimeout(timeout); err != nil {
			sc.writeEarlyAbort(id, http.StatusBadRequest, status.Newf(codes.Internal, "malformed grpc-timeout: %v", err), ended)
			return 0, true
		}
	}
	if !sc.s.handlerStart() {
		sc.writeEarlyAbort(id, http.StatusServiceUnavailable, status.New(codes.Unavailable, "h2grpc: server is stopping"), ended)
		return 0, true
	}
	s := newServerStream(sc, id, encoding, timeout != "", d)
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		s.release()
		sc.s.handlerDone()
		return 0, true
	}
	s.sendWin = sc.peerInitWin
	sc.streams[id] = s
	sc.mu.Unlock()
	if ended {
		s.rb.end()
	}
	sc.handlers.Add(1)
	go sc.runHandler(s, h)
	return 0, true
}

func (sc *serverConn) runHandler(s *ServerStream, h Handler) {
	defer sc.handlers.Done()
	defer sc.s.handlerDone()
	s.finish(h(s))
}

// removeStream forgets a stream whose handler returned.
func (sc *serverConn) removeStream(s *ServerStream) {
	sc.mu.Lock()
	delete(sc.streams, s.id)
	sc.mu.Unlock()
	s.release()
}

// reserve waits until s may send and returns how much of want it may send now (taken from
// the stream's and the connection's send windows), or why it cannot send any more.
func (sc *serverConn) reserve(s *ServerStream, want int) (int, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for {
		switch {
		case sc.closed:
			return 0, errConnClosed
		case s.reset:
			return 0, errStreamReset
		case s.ctx.Err() != nil:
			return 0, s.ctx.Err()
		case s.sendWin > 0 && sc.connSend > 0:
			n := min(int64(want), s.sendWin, sc.connSend, maxSendBatch)
			s.sendWin -= n
			sc.connSend -= n
			return int(n), nil
		}
		sc.cond.Wait()
	}
}

// maxSendBatch bounds what one sender writes under the connection's writer at a time: with a
// peer's window as large as Envoy's (256 MiB by default) a whole large message could go in one
// hold, keeping other streams and the reader's control frames (PING and SETTINGS acks,
// WINDOW_UPDATE) waiting for all of it to reach the socket.
const maxSendBatch = 256 << 10

// wake makes goroutines waiting in reserve look again (a stream's context ended).
func (sc *serverConn) wake() {
	sc.mu.Lock()
	sc.cond.Broadcast()
	sc.mu.Unlock()
}

// ping sends a PING after KeepaliveTime without a frame received, and closes the connection
// when no answer comes within KeepaliveTimeout.
func (sc *serverConn) ping() {
	defer sc.keepalive.Done()
	idle, timeout := sc.s.cfg.KeepaliveTime, sc.s.cfg.KeepaliveTimeout
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		select {
		case <-sc.ctx.Done():
			return
		case <-t.C:
		}
		if sc.activity.Swap(false) {
			t.Reset(idle)
			continue
		}
		select {
		case <-sc.pingAck:
		default:
		}
		sc.lockWrite()
		sc.noteWrite(sc.fr.WritePing(false, [8]byte{'w', 'i', 'n', 'g', 'm', 'a', 'n'}))
		sc.unlockWrite()
		t.Reset(timeout)
		select {
		case <-sc.ctx.Done():
			return
		case <-sc.pingAck:
			t.Stop()
			select {
			case <-t.C:
			default:
			}
			t.Reset(idle)
		case <-t.C:
			sc.nc.Close() // the reader then ends the connection
			return
		}
	}
}
