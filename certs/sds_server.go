package certs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wingman-mesh/wingman/internal/clock"
	"github.com/wingman-mesh/wingman/internal/unixsock"
	"github.com/wingman-mesh/wingman/transport/h2grpc"
)

// secretSource is what the SDS server needs from the secret manager.
type secretSource interface {
	// secret returns the current value of name, nil while it is not available yet, or an error
	// when name cannot be served.
	secret(name string) (*secretValue, error)
	// watch wakes ch (non-blocking, capacity 1) whenever any secret changes, until cancel.
	watch(ch chan struct{}) (cancel func())
}

var _ secretSource = (*Manager)(nil)

// Server is the SDS server Envoy connects to: SotW StreamSecrets on a Unix socket. DeltaSecrets
// and FetchSecrets answer Unimplemented, as Istio's.
type Server struct {
	path  string       // immutable: the socket served
	src   secretSource // concurrency-safe
	clock clock.Clock  // immutable
	log   *slog.Logger // immutable
	met   *metrics     // immutable

	counter atomic.Uint64  // versions and nonces
	streams sync.WaitGroup // receive goroutines of live streams; Run waits for them
	serving chan struct{}  // closed once the socket accepts connections
}

// NewServer builds the SDS server for m's secrets on m's Config.SDSSocketPath, or on
// FilesSocketPath when ServeOnlyFiles is set.
func NewServer(m *Manager) *Server {
	path := m.cfg.SDSSocketPath
	if m.cfg.ServeOnlyFiles {
		path = m.cfg.FilesSocketPath
	}
	log := m.cfg.SDSLogger
	if log == nil {
		log = m.log.With("server", "sds")
	}
	return &Server{path: path, src: m, clock: m.cfg.Clock, log: log, met: m.met,
		serving: make(chan struct{})}
}

// Path is the socket the server listens on.
func (s *Server) Path() string { return s.path }

// Serving is closed once the socket accepts connections.
func (s *Server) Serving() <-chan struct{} { return s.serving }

// Run listens on the socket at once (no certificate is needed to start: requests wait for it)
// and serves until ctx is done; it then stops every stream, waits for them and removes the socket.
func (s *Server) Run(ctx context.Context) error {
	lis, err := s.listen(ctx)
	if err != nil {
		return err
	}
	srv := h2grpc.NewServer(ctx, h2grpc.ServerConfig{MaxConcurrentStreams: 100000, Logger: s.log}, s.sdsRoutes())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	close(s.serving)
	s.log.Info("SDS serving", "socket", s.path)
	select {
	case <-ctx.Done():
		srv.Stop()
		<-errc
		err = nil
	case err = <-errc:
		err = fmt.Errorf("certs: serve SDS on %s: %w", s.path, err)
	}
	s.streams.Wait()
	return err // the listener removed the socket when it closed (unless another has replaced it)
}

// listen creates the socket (mode 0666, parent made, stale file removed), retrying up to five
// times from 1 s, doubling, as Istio.
func (s *Server) listen(ctx context.Context) (net.Listener, error) {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		lis, err := listenUnix(s.path)
		if err == nil {
			return lis, nil
		}
		if attempt == 5 {
			return nil, err
		}
		s.log.Warn("SDS listen failed; retrying", "err", err, "retry_in", wait)
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("certs: SDS listen on %s: %w", s.path, ctx.Err())
		case <-t.C():
		}
		wait *= 2
	}
}

// listenUnix creates the SDS socket with Istio's modes (unixsock.Listen).
func listenUnix(path string) (net.Listener, error) {
	lis, err := unixsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("certs: SDS: %w", err)
	}
	return lis, nil
}

// ProbeSDSSocket reports whether a healthy SDS server (e.g. SPIRE's) already listens at path.
// A stale socket file nobody answers on is removed. cmd calls it to decide ServeOnlyFiles.
func ProbeSDSSocket(path string, timeout time.Duration) (bool, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	c, err := net.DialTimeout("unix", path, timeout)
	if err == nil {
		_ = c.Close()
		return true, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("certs: remove unhealthy SDS socket %s: %w", path, err)
	}
	return false, nil
}

func (s *Server) next() string { return strconv.FormatUint(s.counter.Add(1), 10) }
