package h2grpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServerConfig configures a Server. The zero value works.
type ServerConfig struct {
	// MaxRecvMsgBytes bounds a request message: a larger one fails RecvMsg with
	// ResourceExhausted. 0: 4 MiB, grpc-go's default.
	MaxRecvMsgBytes int
	// MaxConcurrentStreams per connection (SETTINGS_MAX_CONCURRENT_STREAMS); 0: net/http's
	// default (at least 100).
	MaxConcurrentStreams int
	// StreamWindow and ConnWindow are the receive flow-control windows for request data
	// (net/http's HTTP2Config.MaxReceiveBufferPerStream/PerConnection). 0: 1 MiB each
	// (net/http's server defaults). Valid: 64 KiB..2 GiB-1, ConnWindow not below StreamWindow.
	StreamWindow, ConnWindow int
	// KeepaliveTime: after this long without a frame received the server pings the client
	// (HTTP2Config.SendPingTimeout); KeepaliveTimeout: the connection is closed when the ping
	// is not answered within it (PingTimeout; 0 there means net/http's 15 s). 0: no pings.
	KeepaliveTime, KeepaliveTimeout time.Duration
}

// Handler serves one stream; the status of the error it returns (nil: OK; not a status
// error: Unknown with the error's text, as grpc-go) goes out as the stream's trailers.
type Handler func(ss *ServerStream) error

// Server serves gRPC streams over HTTP/2 with prior knowledge (h2c), as Envoy speaks it on a
// Unix socket.
type Server struct {
	// immutable after NewServer
	cfg    ServerConfig
	routes map[string]Handler
	srv    *http.Server
	ctx    context.Context // every stream's context derives from it; Stop cancels it
	cancel context.CancelFunc
	cfgErr error

	mu       sync.Mutex // guards the fields below
	idle     sync.Cond  // on mu: signalled when serving, conns or handlers reach 0
	stopped  bool
	serving  int // Serve calls running
	conns    int // connections between StateNew and StateClosed/StateHijacked
	handlers int // ServeHTTP calls running
}

// NewServer makes a server for routes, keyed by full method path ("/package.Service/Method");
// a request for any other path gets Unimplemented, as from grpc-go. routes is read, never
// copied: do not change it afterwards. A bad cfg makes Serve fail naming the setting.
func NewServer(cfg ServerConfig, routes map[string]Handler) *Server {
	s := &Server{cfg: cfg, routes: routes}
	s.idle.L = &s.mu
	s.ctx, s.cancel = context.WithCancel(context.Background()) //nolint:contextcheck // Stop ends it; Serve has no context
	if s.cfg.MaxRecvMsgBytes == 0 {
		s.cfg.MaxRecvMsgBytes = defaultMaxRecvMsg
	}
	if s.cfg.StreamWindow == 0 {
		s.cfg.StreamWindow = 1 << 20
	}
	if s.cfg.ConnWindow == 0 {
		s.cfg.ConnWindow = max(1<<20, s.cfg.StreamWindow)
	}
	switch {
	case s.cfg.MaxRecvMsgBytes < 0 || uint64(s.cfg.MaxRecvMsgBytes) > math.MaxUint32:
		s.cfgErr = fmt.Errorf("h2grpc: server MaxRecvMsgBytes %d out of range 0..%d", cfg.MaxRecvMsgBytes, uint64(math.MaxUint32))
	case s.cfg.MaxConcurrentStreams < 0 || s.cfg.MaxConcurrentStreams > math.MaxUint32:
		s.cfgErr = fmt.Errorf("h2grpc: server MaxConcurrentStreams %d out of range", cfg.MaxConcurrentStreams)
	case s.cfg.KeepaliveTime < 0 || s.cfg.KeepaliveTimeout < 0:
		s.cfgErr = fmt.Errorf("h2grpc: server keepalive time %v or timeout %v negative", cfg.KeepaliveTime, cfg.KeepaliveTimeout)
	default:
		if err := checkWindows(s.cfg.StreamWindow, s.cfg.ConnWindow); err != nil {
			s.cfgErr = fmt.Errorf("server: %w", err)
		}
	}
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	s.srv = &http.Server{
		Handler:   http.HandlerFunc(s.serveHTTP),
		Protocols: protos,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          s.cfg.MaxConcurrentStreams,
			MaxReceiveBufferPerStream:     s.cfg.StreamWindow,
			MaxReceiveBufferPerConnection: s.cfg.ConnWindow,
			SendPingTimeout:               s.cfg.KeepaliveTime,
			PingTimeout:                   s.cfg.KeepaliveTimeout,
		},
		BaseContext: func(net.Listener) context.Context { return s.ctx },
		ConnState:   s.connState,
		// ErrorLog stays nil: net/http logs a handler's recovered panic and clients'
		// protocol errors to the standard logger, and a panic must not go unseen.
	}
	return s
}

// Serve accepts connections on l until Stop, then returns nil. It closes l.
func (s *Server) Serve(l net.Listener) error {
	if s.cfgErr != nil {
		l.Close()
		return s.cfgErr
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.serving++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.serving--
		s.idle.Broadcast()
		s.mu.Unlock()
	}()
	err := s.srv.Serve(writeBehindListener{l})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Stop closes the listeners and every connection now (streams are long-lived: no graceful
// wait), cancels every stream's context, and waits for every Serve, connection and handler
// to return.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.srv.Close()
	s.mu.Lock()
	for s.serving > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
	// A connection accepted while Close ran is closed by this second Close.
	s.srv.Close()
	s.mu.Lock()
	for s.conns > 0 || s.handlers > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
}

func (s *Server) connState(_ net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.conns++
	case http.StateClosed, http.StateHijacked:
		s.conns--
		s.idle.Broadcast()
	}
}

// handlerStart counts a handler in; false once stopped (no handler starts after Stop began).
func (s *Server) handlerStart() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.handlers++
	return true
}

func (s *Server) handlerDone() {
	s.mu.Lock()
	s.handlers--
	s.idle.Broadcast()
	s.mu.Unlock()
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.handlerStart() {
		earlyAbort(w, http.StatusServiceUnavailable, status.New(codes.Unavailable, "h2grpc: server is stopping"))
		return
	}
	defer s.handlerDone()
	// Checks in grpc-go's order and wording (internal/transport/http2_server.go
	// operateHeaders): content-type (415), then method (405), then the route.
	if ct := r.Header.Get("Content-Type"); !isGRPCContentType(ct) {
		earlyAbort(w, http.StatusUnsupportedMediaType, status.Newf(codes.InvalidArgument, "invalid gRPC request content-type %q", ct))
		return
	}
	if r.Method != http.MethodPost {
		earlyAbort(w, http.StatusMethodNotAllowed, status.Newf(codes.Internal, "Received a HEADERS frame with :method %q which should be POST", r.Method))
		return
	}
	h, ok := s.routes[r.URL.Path]
	if !ok {
		earlyAbort(w, http.StatusOK, unknownMethod(r.URL.Path, s.routes))
		return
	}
	ctx := r.Context()
	if v := r.Header.Get("Grpc-Timeout"); v != "" {
		d, err := parseTimeout(v)
		if err != nil {
			earlyAbort(w, http.StatusBadRequest, status.Newf(codes.Internal, "malformed grpc-timeout: %v", err))
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	ss := newServerStream(ctx, w, r, s.cfg.MaxRecvMsgBytes)
	err := h(ss)
	ss.finish(err)
}

// unknownMethod is grpc-go's status for a path with no handler (server.go handleStream).
func unknownMethod(path string, routes map[string]Handler) *status.Status {
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || path == "" || path[0] != '/' {
		return status.Newf(codes.Unimplemented, "malformed method name: %q", path)
	}
	for known := range routes {
		if strings.HasPrefix(known, "/"+svc+"/") {
			return status.Newf(codes.Unimplemented, "unknown method %v for service %v", method, svc)
		}
	}
	return status.Newf(codes.Unimplemented, "unknown service %v", svc)
}

// earlyAbort answers a stream that never reaches a handler: a trailers-only response with the
// given HTTP status, as grpc-go's writeEarlyAbort.
func earlyAbort(w http.ResponseWriter, httpStatus int, st *status.Status) {
	h := w.Header()
	h["Content-Type"] = []string{"application/grpc"}
	setStatusHeaders(h, "", st)
	w.WriteHeader(httpStatus)
}

// setStatusHeaders sets grpc-status and grpc-message (percent-encoded), with prefix
// http.TrailerPrefix when they go in trailers after a response body; without a body, they go
// in the only HEADERS frame. Date and Content-Length, which net/http adds by itself, are
// suppressed (nil values): a gRPC response carries neither.
func setStatusHeaders(h http.Header, prefix string, st *status.Status) {
	h[prefix+"Grpc-Status"] = []string{strconv.Itoa(int(st.Code()))}
	if msg := st.Message(); msg != "" {
		h[prefix+"Grpc-Message"] = []string{encodeGrpcMessage(msg)}
	}
	if prefix == "" {
		h["Date"] = nil
		h["Content-Length"] = nil
	}
}

// parseTimeout reads a grpc-timeout value: at most 8 digits and a unit of H, M, S, m, u or n
// (PROTOCOL-HTTP2.md, "Timeout").
func parseTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, fmt.Errorf("%q: want 1 to 8 digits and a unit", v)
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", v, err)
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("%q: unknown unit", v)
	}
	if d := time.Duration(n); d > math.MaxInt64/unit {
		return math.MaxInt64, nil
	}
	return time.Duration(n) * unit, nil
}
