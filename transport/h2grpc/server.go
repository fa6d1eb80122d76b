package h2grpc

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
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
	// MaxConcurrentStreams per connection (SETTINGS_MAX_CONCURRENT_STREAMS); a stream over it
	// is refused (RST_STREAM REFUSED_STREAM). 0: 250, the default of Go's HTTP/2 server
	// (golang.org/x/net/http2 defaultMaxStreams).
	MaxConcurrentStreams int
	// StreamWindow and ConnWindow are the receive flow-control windows for request data, a
	// stream's granted back as its handler reads, the connection's as data arrives (as the
	// Client's; core_recv.go). 0: 1 MiB each (the defaults of Go's HTTP/2 server). Valid: 64 KiB..2 GiB-1, ConnWindow
	// not below StreamWindow.
	StreamWindow, ConnWindow int
	// KeepaliveTime: after this long without a frame received the server pings the client;
	// KeepaliveTimeout: the connection is closed when the ping is not answered within it (0
	// there means 15 s, as Go's HTTP/2 server). 0: no pings. With KeepaliveTime set, every write
	// also has a deadline of KeepaliveTime + KeepaliveTimeout: a client that stops reading is
	// found dead within that even while a write holds the connection.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// PingMinTime and PermitPingWithoutStream are grpc-go's keepalive.EnforcementPolicy: a
	// client PING sooner than PingMinTime after the previous one (2 h when no stream is open and
	// PermitPingWithoutStream is false) is a strike, a HEADERS or DATA frame sent clears them,
	// and the third strike ends the connection with GOAWAY ENHANCE_YOUR_CALM "too_many_pings"
	// (grpc-go internal/transport/http2_server.go handlePing, maxPingStrikes 2). 0: 5 min,
	// grpc-go's default. Every PING is answered still.
	PingMinTime             time.Duration
	PermitPingWithoutStream bool
	// PrefaceTimeout bounds the wait for a new connection's client preface. 0: 10 s, as Go's
	// HTTP/2 server (x/net/http2 server.go prefaceTimeout).
	PrefaceTimeout time.Duration
	// Logger receives what the server cannot report to a caller: a handler's panic, with its
	// stack. nil: discarded.
	Logger *slog.Logger
}

// grpc-go's server ping policy (internal/transport/defaults.go defaultKeepalivePolicyMinTime,
// http2_server.go maxPingStrikes; the 2 h for pings without a stream is its defaultPingTimeout).
const (
	defaultPingMinTime   = 5 * time.Minute
	pingIdleMinTime      = 2 * time.Hour
	maxPingStrikes       = 2
	tooManyPingsDebugMsg = "too_many_pings"
)

// defaultPrefaceTimeout is Go's HTTP/2 server's wait for the client preface.
const defaultPrefaceTimeout = 10 * time.Second

// defaultMaxStreams is Go's HTTP/2 server default (x/net/http2 server.go), which this server
// had when it ran on net/http; its ping timeout is the client's defaultPingTimeout, the same 15 s.
const defaultMaxStreams = 250

// Handler serves one stream; the status of the error it returns (nil: OK; not a status
// error: Unknown with the error's text, as grpc-go) goes out as the stream's trailers.
type Handler func(ss *ServerStream) error

// Server serves gRPC streams over HTTP/2 with prior knowledge (h2c), as Envoy speaks it on a
// Unix socket: no TLS, no HTTP/1 upgrade; a client that does not open with the HTTP/2 preface
// has its connection closed.
type Server struct {
	// immutable after NewServer
	cfg    ServerConfig
	routes map[string]Handler
	ctx    context.Context // every stream's context derives from it; Stop cancels it
	cancel context.CancelFunc
	cfgErr error

	mu        sync.Mutex // guards the fields below
	idle      sync.Cond  // on mu: signalled when serving, conns or handlers reach 0
	stopped   bool
	serving   int // Serve calls running
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
	handlers  int // handlers running
}

// NewServer makes a server for routes, keyed by full method path ("/package.Service/Method");
// a request for any other path gets Unimplemented, as from grpc-go. A bad cfg makes Serve fail
// naming the setting. Every stream's context derives from ctx: its end cancels them all, as
// Stop does (Stop is still needed to close listeners and connections).
func NewServer(ctx context.Context, cfg ServerConfig, routes map[string]Handler) *Server {
	s := &Server{cfg: cfg, routes: routes, listeners: map[net.Listener]struct{}{}, conns: map[*serverConn]struct{}{}}
	s.idle.L = &s.mu
	s.ctx, s.cancel = context.WithCancel(ctx)
	if s.cfg.PrefaceTimeout == 0 {
		s.cfg.PrefaceTimeout = defaultPrefaceTimeout
	}
	if s.cfg.Logger == nil {
		s.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if s.cfg.MaxRecvMsgBytes == 0 {
		s.cfg.MaxRecvMsgBytes = defaultMaxRecvMsg
	}
	if s.cfg.MaxConcurrentStreams == 0 {
		s.cfg.MaxConcurrentStreams = defaultMaxStreams
	}
	if s.cfg.StreamWindow == 0 {
		s.cfg.StreamWindow = 1 << 20
	}
	if s.cfg.ConnWindow == 0 {
		s.cfg.ConnWindow = max(1<<20, s.cfg.StreamWindow)
	}
	if s.cfg.PingMinTime == 0 {
		s.cfg.PingMinTime = defaultPingMinTime
	}
	if s.cfg.KeepaliveTimeout == 0 {
		s.cfg.KeepaliveTimeout = defaultPingTimeout
	}
	switch {
	case s.cfg.MaxRecvMsgBytes < 0 || uint64(s.cfg.MaxRecvMsgBytes) > math.MaxUint32:
		s.cfgErr = fmt.Errorf("h2grpc: server MaxRecvMsgBytes %d out of range 0..%d", cfg.MaxRecvMsgBytes, uint64(math.MaxUint32))
	case s.cfg.MaxConcurrentStreams < 0 || s.cfg.MaxConcurrentStreams > math.MaxUint32:
		s.cfgErr = fmt.Errorf("h2grpc: server MaxConcurrentStreams %d out of range", cfg.MaxConcurrentStreams)
	case s.cfg.PingMinTime < 0:
		s.cfgErr = fmt.Errorf("h2grpc: server PingMinTime %v negative", cfg.PingMinTime)
	case s.cfg.PrefaceTimeout < 0:
		s.cfgErr = fmt.Errorf("h2grpc: server PrefaceTimeout %v negative", cfg.PrefaceTimeout)
	case s.cfg.KeepaliveTime < 0 || s.cfg.KeepaliveTimeout < 0:
		s.cfgErr = fmt.Errorf("h2grpc: server keepalive time %v or timeout %v negative", cfg.KeepaliveTime, cfg.KeepaliveTimeout)
	default:
		if err := checkWindows(s.cfg.StreamWindow, s.cfg.ConnWindow); err != nil {
			s.cfgErr = fmt.Errorf("server: %w", err)
		}
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
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		l.Close()
		s.mu.Lock()
		delete(s.listeners, l)
		s.serving--
		s.idle.Broadcast()
		s.mu.Unlock()
	}()
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			stopped := s.stopped
			s.mu.Unlock()
			if stopped {
				return nil
			}
			return fmt.Errorf("h2grpc: accept: %w", err)
		}
		sc := newServerConn(s, nc)
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[sc] = struct{}{}
		s.mu.Unlock()
		go func() {
			sc.serve()
			s.mu.Lock()
			delete(s.conns, sc)
			s.idle.Broadcast()
			s.mu.Unlock()
		}()
	}
}

// Stop closes the listeners and every connection now (streams are long-lived: no graceful
// wait), cancels every stream's context, and waits for every Serve, connection and handler
// to return.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	for l := range s.listeners {
		l.Close()
	}
	for sc := range s.conns {
		sc.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.mu.Lock()
	for s.serving > 0 || len(s.conns) > 0 || s.handlers > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
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
