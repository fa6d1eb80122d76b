package h2grpc

import (
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// onHeaders opens a stream (or ends one, with trailers).
func (sc *serverConn) onHeaders(f *http2.MetaHeadersFrame) (http2.ErrCode, bool) {
	id := f.StreamID
	if f.HasPriority() && f.Priority.StreamDep == id {
		sc.streamFailed(id, http2.ErrCodeProtocol) // section 5.3.1: depends on itself
		return 0, true
	}
	if s := sc.stream(id); s != nil {
		if code := trailersError(f, s.in.ended()); code != 0 {
			sc.streamFailed(id, code)
			return 0, true
		}
		s.in.end(nil)
		return 0, true
	}
	if a := sc.answered[id]; a != nil {
		code := trailersError(f, false)
		if code == 0 && a.contentLen >= 0 && a.got != a.contentLen {
			code = http2.ErrCodeProtocol // section 8.1.1: content-length disagrees with DATA
		}
		delete(sc.answered, id)
		if code != 0 {
			sc.writeRST(id, code)
		}
		return 0, true
	}
	if id%2 == 0 {
		return http2.ErrCodeProtocol, false // clients open odd streams (section 5.1.1)
	}
	if id <= sc.lastStream {
		// A closed stream, or an id lower than one already opened (section 5.1.1), as Go's
		// HTTP/2 server treats it.
		return http2.ErrCodeProtocol, false
	}
	sc.lastStream = id
	ended := f.StreamEnded()
	sc.mu.Lock()
	open := sc.running + len(sc.answered)
	sc.mu.Unlock()
	if sc.goingAway || open >= sc.s.cfg.MaxConcurrentStreams {
		sc.writeRST(id, http2.ErrCodeRefusedStream)
		return 0, true
	}
	if f.Truncated {
		sc.writeEarlyAbort(id, http.StatusRequestHeaderFieldsTooLarge, status.New(codes.Internal, "h2grpc: request headers over the size limit"), ended, -1)
		return 0, true
	}
	method, path := f.PseudoValue("method"), f.PseudoValue("path")
	if method == "" || path == "" || f.PseudoValue("scheme") == "" {
		sc.writeRST(id, http2.ErrCodeProtocol) // section 8.3.1: mandatory pseudo-headers
		return 0, true
	}
	var ct, timeout, encoding string
	contentLen := int64(-1)
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "content-length":
			n, err := strconv.ParseUint(hf.Value, 10, 63)
			if err != nil || (ended && n != 0) {
				sc.writeRST(id, http2.ErrCodeProtocol) // section 8.1.1
				return 0, true
			}
			contentLen = int64(n)
		case "content-type":
			ct = hf.Value
		case "grpc-timeout":
			timeout = hf.Value
		case "grpc-encoding":
			encoding = hf.Value
		case "te":
			if hf.Value != "trailers" {
				sc.writeRST(id, http2.ErrCodeProtocol) // section 8.2.2
				return 0, true
			}
		case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
			sc.writeRST(id, http2.ErrCodeProtocol) // section 8.2.2: connection-specific
			return 0, true
		}
	}
	// Checks in grpc-go's order and wording (internal/transport/http2_server.go
	// operateHeaders): content-type (415), then method (405), then the route.
	if !isGRPCContentType(ct) {
		sc.writeEarlyAbort(id, http.StatusUnsupportedMediaType, status.Newf(codes.InvalidArgument, "invalid gRPC request content-type %q", ct), ended, contentLen)
		return 0, true
	}
	if method != http.MethodPost {
		sc.writeEarlyAbort(id, http.StatusMethodNotAllowed, status.Newf(codes.Internal, "Received a HEADERS frame with :method %q which should be POST", method), ended, contentLen)
		return 0, true
	}
	h, ok := sc.s.routes[strings.SplitN(path, "?", 2)[0]]
	if !ok {
		sc.writeEarlyAbort(id, http.StatusOK, unknownMethod(path, sc.s.routes), ended, contentLen)
		return 0, true
	}
	var d time.Duration
	if timeout != "" {
		var err error
		if d, err = parseTimeout(timeout); err != nil {
			sc.writeEarlyAbort(id, http.StatusBadRequest, status.Newf(codes.Internal, "malformed grpc-timeout: %v", err), ended, contentLen)
			return 0, true
		}
	}
	if !sc.s.handlerStart() {
		sc.writeEarlyAbort(id, http.StatusServiceUnavailable, status.New(codes.Unavailable, "h2grpc: server is stopping"), ended, contentLen)
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
	s.sendWin = sc.peerWin
	sc.streams[id] = s
	sc.running++
	sc.mu.Unlock()
	if ended {
		s.in.end(nil)
	}
	sc.handlers.Add(1)
	go sc.runHandler(s, h, path)
	return 0, true
}

// trailersError checks a HEADERS frame on an open stream, which can only be its trailers: it
// must end the stream (section 8.1) and carries no pseudo-header (section 8.3). A stream whose
// request already ended is half-closed (remote): STREAM_CLOSED (section 5.1).
func trailersError(f *http2.MetaHeadersFrame, ended bool) http2.ErrCode {
	switch {
	case ended:
		return http2.ErrCodeStreamClosed
	case !f.StreamEnded(), len(f.PseudoFields()) > 0:
		return http2.ErrCodeProtocol
	}
	return 0
}

// runHandler runs a stream's handler. A handler that panics ends its own stream with Internal
// and the panic goes to the server's Logger with its stack, as net/http's server logs it: the agent is PID 1 of its
// container, and one stream's bug must not take Envoy's xDS and SDS down with it.
func (sc *serverConn) runHandler(s *ServerStream, h Handler, path string) {
	defer sc.handlers.Done()
	defer sc.s.handlerDone()
	defer func() {
		if v := recover(); v != nil {
			sc.s.cfg.Logger.Error("h2grpc: panic serving", "method", path, "panic", v, "stack", string(debug.Stack()))
			s.finish(status.Errorf(codes.Internal, "handler panic: %v", v))
		}
	}()
	s.finish(h(s))
}
