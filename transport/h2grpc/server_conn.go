package h2grpc

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// errConnClosed ends the streams of a connection that is gone.
var errConnClosed = errors.New("connection closed")

// errStreamReset ends the receive side of a stream reset by either end.
var errStreamReset = errors.New("stream reset")

// serverConn is one HTTP/2 connection of a Server: one goroutine reads its frames (serve),
// one per stream runs the handler, and every frame written goes through the connection core's
// writer (core_writer.go).
type serverConn struct {
	conn // the writer, settings, windows and keepalive shared with the client

	s      *Server
	ctx    context.Context // streams' contexts derive from it; cancelled when the connection ends
	cancel context.CancelFunc

	// guarded by conn.mu, as every stream's send window
	streams map[uint32]*ServerStream
	running int // streams whose handler has not yet ended them: what MAX_CONCURRENT_STREAMS counts
	closed  bool

	// owned by the reading goroutine
	lastStream uint32 // the highest stream the peer opened
	goingAway  bool   // the peer sent GOAWAY
	// answered are the streams answered before any handler (writeEarlyAbort) whose request is
	// still coming: half-closed (local). They count against MAX_CONCURRENT_STREAMS; their send
	// windows are guarded by conn.mu.
	answered    map[uint32]*answeredStream
	lastPingAt  time.Time // the client's last PING (ping policy, server_keepalive.go onPing)
	pingStrikes int

	handlers sync.WaitGroup // handler goroutines
	pinging  sync.WaitGroup // the keepalive goroutine
}

func newServerConn(s *Server, nc net.Conn) *serverConn {
	sc := &serverConn{
		s:        s,
		streams:  map[uint32]*ServerStream{},
		answered: map[uint32]*answeredStream{},
	}
	var writeTimeout time.Duration
	if s.cfg.KeepaliveTime > 0 {
		writeTimeout = s.cfg.KeepaliveTime + s.cfg.KeepaliveTimeout
	}
	// After a write error the connection is closed; its reader then ends it.
	sc.initConn(nc, s.cfg.ConnWindow, maxSendBatch, writeTimeout, func(error) { nc.Close() })
	sc.ctx, sc.cancel = context.WithCancel(s.ctx)
	sc.fr.MaxHeaderListSize = maxHeaderList
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
	sc.writeSettingsLocked(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(sc.s.cfg.MaxConcurrentStreams)},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(sc.s.cfg.StreamWindow)},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderList},
	)
	if sc.unlockWrite() != nil {
		return
	}
	if sc.s.cfg.KeepaliveTime > 0 {
		sc.pinging.Add(1)
		go sc.ping()
	}
	for first := true; ; first = false {
		f, err := sc.readFrame(first, sc)
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				sc.streamFailed(se.StreamID, se.Code)
				continue
			}
			var pe connProtocolError
			if errors.As(err, &pe) {
				sc.goAway(pe.code)
			}
			return
		}
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
		s.in.abort(errConnClosed)
	}
	sc.handlers.Wait()
	sc.pinging.Wait()
}

// goAway tells the peer the connection ends for a protocol error; the caller then closes it.
func (sc *serverConn) goAway(code http2.ErrCode) {
	sc.writeGoAway(sc.lastStream, code, nil)
}

// handle acts on one frame; a connection error returns its code and false.
func (sc *serverConn) handle(f http2.Frame) (http2.ErrCode, bool) {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return sc.onHeaders(f)
	case *http2.WindowUpdateFrame: // read by readWindowUpdate
	case *http2.SettingsFrame:
		if err := sc.onSettings(f, sc); err != nil {
			var pe connProtocolError
			if errors.As(err, &pe) {
				return pe.code, false
			}
			return http2.ErrCodeInternal, false
		}
	case *http2.PingFrame:
		if sc.onPing(f) && !sc.pingPolicy() {
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
	delete(sc.answered, id)
	sc.writeRST(id, code)
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
		s.in.abort(errStreamReset)
		s.cancel()
	}
}

// shiftSendWindowsLocked, sendWindowLocked and settingLocked are the server's connSide. The
// streams answered before any handler count too: the peer may still grant them window.
func (sc *serverConn) shiftSendWindowsLocked(delta int64) (over uint32) {
	for id, s := range sc.streams {
		if shiftWindowLocked(&s.sendWin, delta) {
			over = id
		}
	}
	for id, a := range sc.answered {
		if shiftWindowLocked(&a.sendWin, delta) {
			over = id
		}
	}
	return over
}

func (sc *serverConn) sendWindowLocked(id uint32) (*int64, error) {
	if s := sc.streams[id]; s != nil {
		return &s.sendWin, nil
	}
	if sc.idle(id) {
		return nil, connProtocolError{http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"} // section 5.1
	}
	if a := sc.answered[id]; a != nil {
		return &a.sendWin, nil
	}
	return nil, nil // a closed stream: the peer may not know yet
}

// settingLocked: MAX_CONCURRENT_STREAMS limits the streams we open (none); ENABLE_PUSH,
// MAX_HEADER_LIST_SIZE and unknown settings concern nothing we send.
func (sc *serverConn) settingLocked(http2.Setting) {}

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
