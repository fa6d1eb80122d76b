package controlplane

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Start serves TLS (as Serve) on addr in the background until Stop; port 0 picks a free port.
// A port just freed by Stop may take a moment to bind again: Start retries for up to two
// seconds.
func (s *Server) Start(addr string) error {
	var l net.Listener
	var err error
	for range 100 {
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("controlplane: listen on %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		cancel()
		l.Close()
		return fmt.Errorf("controlplane: already serving on %s", s.addr)
	}
	s.addr, s.stop, s.done = l.Addr().String(), cancel, done
	go func() { done <- s.Serve(ctx, l) }()
	return nil
}

// Addr is the host:port of the last Start (kept after Stop).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stop ends the server of Start, closing every stream and connection, and waits for it; it
// returns what Serve returned. Stopping a stopped server does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop = nil
	s.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	return <-done
}

// Restart stops the server of Start, waits pause (or until ctx is done), and serves again on
// the same address: an Istiod restart behind a stable address.
func (s *Server) Restart(ctx context.Context, pause time.Duration) error {
	if err := s.Stop(); err != nil {
		return err
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return s.Start(s.Addr())
}
