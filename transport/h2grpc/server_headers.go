package h2grpc

import (
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
	open := sc.running
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
	sc.running++
	sc.mu.Unlock()
	if ended {
		s.rb.end()
	}
	sc.handlers.Add(1)
	go sc.runHandler(s, h, path)
	return 0, true
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
