package h2grpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// initialWindow is HTTP/2's initial window for both directions before SETTINGS (RFC 9113
// section 6.9.2), and maxFrameDefault its initial SETTINGS_MAX_FRAME_SIZE (section 6.5.2).
const (
	initialWindow   = 65535
	maxFrameDefault = 16384
)

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
	br     *connReader
	ctx    context.Context // streams' contexts derive from it; cancelled when the connection ends
	cancel context.CancelFunc

	// writer (server_write.go)
	wmu          sync.Mutex
	waiters      atomic.Int32 // goroutines waiting for wmu
	bw           *connWriter
	henc         *hpack.Encoder // writes into hbuf
	hbuf         bytes.Buffer
	dataHdr      [9]byte
	werr         error         // first write error; under wmu
	writeTimeout time.Duration // immutable: each write's deadline, 0 for none (lockWrite)
	peerMaxFrame atomic.Uint32 // the peer's SETTINGS_MAX_FRAME_SIZE

	mu          sync.Mutex // guards the fields below and every stream's send window
	cond        sync.Cond  // on mu: a send window grew, or a stream or the connection ended
	streams     map[uint32]*ServerStream
	running     int // streams whose handler has not yet ended them: what MAX_CONCURRENT_STREAMS counts
	closed      bool
	connSend    int64 // bytes we may still send on the connection
	peerInitWin int64 // the peer's SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window

	// owned by the reading goroutine
	lastStream  uint32 // the highest stream the peer opened
	connRecv    int64  // bytes the peer may still send on the connection
	connUnacked int64  // bytes received and not yet granted back
	goingAway   bool   // the peer sent GOAWAY
	// answered are the streams answered before any handler (writeEarlyAbort) whose request is
	// still coming: half-closed (local). They count against MAX_CONCURRENT_STREAMS.
	answered    map[uint32]*answeredStream
	wuBuf       [4]byte
	lastPingAt  time.Time // the client's last PING (ping policy, server_keepalive.go onPing)
	pingStrikes int

	handlers  sync.WaitGroup // handler goroutines
	keepalive sync.WaitGroup // the pinging goroutine
	lastRead  atomic.Int64   // Unix nanoseconds of the last frame received (keepalive.go)
	// sentStreamFrame: HEADERS or DATA went out since the client's last PING (which clears
	// its strikes, as grpc-go's resetPingStrikes).
	sentStreamFrame atomic.Bool
	pingAck         chan struct{} // the reader -> keepalive: our PING was answered
}

func newServerConn(s *Server, nc net.Conn) *serverConn {
	sc := &serverConn{
		s:           s,
		nc:          nc,
		br:          newConnReader(nc),
		bw:          newConnWriter(nc),
		streams:     map[uint32]*ServerStream{},
		answered:    map[uint32]*answeredStream{},
		connSend:    initialWindow,
		peerInitWin: initialWindow,
		connRecv:    int64(s.cfg.ConnWindow),
		pingAck:     make(chan struct{}, 1),
	}
	if s.cfg.KeepaliveTime > 0 {
		sc.writeTimeout = s.cfg.KeepaliveTime + s.cfg.KeepaliveTimeout
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
	// A client has PrefaceTimeout to open with the preface (Go's HTTP/2 server allows 10 s).
	var preface [len(http2.ClientPreface)]byte
	sc.nc.SetReadDeadline(time.Now().Add(sc.s.cfg.PrefaceTimeout))
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
		sc.lastRead.Store(time.Now().UnixNano())
		if f == nil {
			continue
		}
		if code, ok := sc.handle(f); !ok {
			sc.goAway(code)
			return
		}
	}
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
	sc.lockWrite()
	sc.nc.SetWriteDeadline(time.Now().Add(time.Second))
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
		if !sc.onPing(f.Data) {
			return 0, false // GOAWAY ENHANCE_YOUR_CALM already sent
		}
	case *http2.RSTStreamFrame:
		if sc.idle(f.StreamID) {
			return http2.ErrCodeProtocol, false // RST_STREAM on an idle stream (section 6.4)
		}
		delete(sc.answered, f.StreamID)
		sc.endStream(f.StreamID)
	case *http2.PriorityFrame:
		if f.StreamID == f.StreamDep {
			sc.streamFailed(f.StreamID, http2.ErrCodeProtocol) // section 5.3.1: depends on itself
		}
	case *http2.GoAwayFrame:
		// The client opens no more streams; those open run to their end.
		sc.goingAway = true
	case *http2.PushPromiseFrame:
		return http2.ErrCodeProtocol, false // a client cannot push (section 8.4)
	}
	// PRIORITY and unknown frame types are otherwise ignored (sections 5.3.2, 5.5).
	return 0, true
}

// answeredStream is a stream answered before any handler whose request is still coming: its
// frames are checked as an open stream's and discarded.
type answeredStream struct {
	sendWin    int64 // only checked for overflow (section 6.9.1): nothing more is sent
	contentLen int64 // the request's content-length, -1 when it has none
	got        int64 // DATA payload received
}

// idle reports whether id names a stream in the idle state (RFC 9113 section 5.1): one the
// client has not opened yet, or an even one (the server pushes none).
func (sc *serverConn) idle(id uint32) bool {
	return id != 0 && (id%2 == 0 || id > sc.lastStream)
}

// stream returns the open stream id, or nil: a stream reset by either side is closed (RFC
// 9113 section 5.1) though its handler may not have returned yet.
func (sc *serverConn) stream(id uint32) *ServerStream {
	sc.mu.Lock()
	s := sc.streams[id]
	if s != nil && s.reset {
		s = nil
	}
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
			// may become negative; one taken past 2^31-1 is a connection FLOW_CONTROL_ERROR.
			sc.mu.Lock()
			delta := int64(st.Val) - sc.peerInitWin
			sc.peerInitWin = int64(st.Val)
			for _, s := range sc.streams {
				s.sendWin += delta
				if s.sendWin > math.MaxInt32 {
					code, ok = http2.ErrCodeFlowControl, false
				}
			}
			sc.cond.Broadcast()
			sc.mu.Unlock()
			for _, a := range sc.answered {
				a.sendWin += delta
				if a.sendWin > math.MaxInt32 {
					code, ok = http2.ErrCodeFlowControl, false
				}
			}
			if !ok {
				return http2.ConnectionError(code)
			}
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

// endRunningLocked stops counting s against MAX_CONCURRENT_STREAMS (once). It is called before a
// handler's trailers go out: a client that sees them may open its next stream at once, and must
// not find it refused. sc.mu must be held.
func (sc *serverConn) endRunningLocked(s *ServerStream) {
	if !s.ended {
		s.ended = true
		sc.running--
	}
}

// removeStream forgets a stream whose handler returned.
func (sc *serverConn) removeStream(s *ServerStream) {
	sc.mu.Lock()
	delete(sc.streams, s.id)
	sc.endRunningLocked(s)
	sc.mu.Unlock()
	s.release()
}
