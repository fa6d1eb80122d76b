// Package lifecycle runs the agent's services in Istio's start-up order (DNS → certificates and
// SDS → xDS proxy → gRPC bootstrap → Envoy) and stops them in the order Kubernetes needs: on
// shutdown, Envoy (and the status server) stop first, while the services Envoy depends on keep
// serving until it is gone. The first failure cancels everything and is the one reported.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// Service is one part of the agent.
type Service struct {
	Name string
	// Start, when set, runs synchronously before the next service starts (bind a socket, write a
	// file); an error aborts start-up.
	Start func(ctx context.Context) error
	// Run, when set, serves until its context is done.
	Run func(ctx context.Context) error
	// KeepDuringDrain keeps the service running after shutdown begins, until every service
	// without it (Envoy) has returned: the xDS proxy, SDS and DNS that a draining Envoy still uses.
	KeepDuringDrain bool
}

// Run starts services in order and waits for all of them. Cancelling ctx begins the shutdown.
// A service whose Run returns while its context is still live ends the agent: the others are
// cancelled, and its error (nil for a clean exit) is the one returned. Errors are wrapped with
// the service's name; context.Canceled returned after cancellation is not an error.
func Run(ctx context.Context, log *slog.Logger, services []Service) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	shutdownCtx, cancelShutdown := context.WithCancel(ctx)
	defer cancelShutdown()
	keepCtx, cancelKeep := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelKeep()

	var mu sync.Mutex
	var first error // guarded by mu
	var ended bool  // guarded by mu: a service ended early or failed to start
	record := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil && !ended {
			first = err
		}
		ended = true
	}
	fail := func(err error) {
		record(err)
		cancelShutdown()
		cancelKeep()
	}

	type done struct{ keep bool }
	results := make(chan done, len(services))
	var wg sync.WaitGroup
	running, runningMain := 0, 0
	for _, s := range services {
		if shutdownCtx.Err() != nil {
			break
		}
		sctx := shutdownCtx
		if s.KeepDuringDrain {
			sctx = keepCtx
		}
		if s.Start != nil {
			if err := s.Start(sctx); err != nil {
				fail(fmt.Errorf("starting %s: %w", s.Name, err))
				break
			}
		}
		if s.Run == nil {
			continue
		}
		running++
		if !s.KeepDuringDrain {
			runningMain++
		}
		log.Debug("service started", "service", s.Name)
		wg.Go(func() {
			err := s.Run(sctx)
			switch {
			case sctx.Err() == nil: // ended on its own: the agent ends
				if err != nil {
					err = fmt.Errorf("%s: %w", s.Name, err)
				}
				log.Info("service ended; stopping the agent", "service", s.Name, "error", err)
				fail(err)
			case err != nil && !errors.Is(err, context.Canceled):
				log.Warn("service failed while stopping", "service", s.Name, "error", err)
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("%s: %w", s.Name, err)
				}
				mu.Unlock()
			default:
				log.Debug("service stopped", "service", s.Name)
			}
			results <- done{keep: s.KeepDuringDrain}
		})
	}

	shutdown := shutdownCtx.Done()
	for running > 0 {
		if runningMain == 0 && shutdownCtx.Err() != nil {
			cancelKeep() // Envoy is gone: stop what it was using
		}
		select {
		case r := <-results:
			running--
			if !r.keep {
				runningMain--
			}
		case <-shutdown:
			shutdown = nil
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return first
}
