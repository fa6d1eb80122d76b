package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wingman-mesh/wingman/status/merge"
	"github.com/wingman-mesh/wingman/status/probe"
)

// Server is the status server. Immutable after New, except the readiness latches (atomic)
// and the handler tracker (guarded by its mutex).
type Server struct {
	cfg     Config
	ready   *readiness
	handler http.Handler
	track   tracker
}

// New validates cfg (including ISTIO_KUBE_APP_PROBERS and ISTIO_PROMETHEUS_ANNOTATIONS) and
// builds the server; it binds nothing.
func New(cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	actions, err := probe.Parse([]byte(cfg.AppProbers))
	if err != nil {
		return nil, fmt.Errorf("ISTIO_KUBE_APP_PROBERS: %w", err)
	}
	prober, err := probe.New(probe.Config{
		Actions:      actions,
		TargetHost:   cfg.ProbeTargetHost,
		StatusPort:   cfg.Port,
		DisableHTTP2: cfg.DisableHTTP2Probing,
		KeepAlive:    cfg.ProbeKeepAlive,
		Logger:       cfg.ProbeLogger,
	})
	if err != nil {
		return nil, err
	}
	mcfg := merge.Config{
		Agent:      cfg.Gatherer,
		MaxBytes:   cfg.MaxScrapeBytes,
		Timeout:    cfg.ScrapeTimeout,
		Registerer: cfg.Registerer,
		Logger:     cfg.Logger,
	}
	if !cfg.NoEnvoy && !cfg.SkipEnvoyStats {
		// "localhost", as Istio's handleStats (status/server.go at 1.30.3): either loopback.
		mcfg.EnvoyURL = "http://" + net.JoinHostPort("localhost", strconv.Itoa(cfg.EnvoyPrometheusPort)) + "/stats/prometheus"
	}
	if cfg.NodeType == "" || cfg.NodeType == "sidecar" {
		targets, err := merge.ParseAnnotations([]byte(cfg.PrometheusAnnotations), cfg.Port)
		if err != nil {
			return nil, fmt.Errorf("ISTIO_PROMETHEUS_ANNOTATIONS: %w", err)
		}
		for _, t := range targets {
			mcfg.AppURLs = append(mcfg.AppURLs, "http://"+net.JoinHostPort(cfg.AppMetricsHost, strconv.Itoa(t.Port))+t.Path)
		}
	}
	merger, err := merge.New(mcfg)
	if err != nil {
		return nil, err
	}

	s := &Server{cfg: cfg}
	s.ready = newReadiness(&s.cfg)
	mux := http.NewServeMux()
	mux.Handle("/healthz/ready", s.ready)
	metrics := http.Handler(merger)
	if cfg.MetricsLocalhostOnly {
		metrics = localOnly(merger.ServeHTTP)
	}
	mux.Handle("/stats/prometheus", metrics)
	mux.Handle("/metrics", metrics)
	mux.Handle("/app-health/", prober)
	mux.Handle("/app-lifecycle/", prober)
	mux.HandleFunc("/quitquitquit", s.handleQuit)
	mux.HandleFunc("/drain", s.handleDrain)
	mux.HandleFunc("/debug/ndsz", localOnly(s.handleNDSZ))
	if cfg.Profiling {
		registerPprof(mux)
	}
	s.handler = s.track.wrap(gzipHandler(mux))
	return s, nil
}

// Handler is the server's HTTP handler, for tests and for serving on a caller's listener.
func (s *Server) Handler() http.Handler { return s.handler }

// CheckReady runs the readiness check /healthz/ready answers: nil when ready, else why not.
func (s *Server) CheckReady(ctx context.Context) error { return s.ready.check(ctx) }

// Run binds Config.Port at once and serves until ctx is done, then closes the port
// immediately (Istio's status port closes as soon as shutdown starts) and returns when every
// handler has returned. With Port 0 it serves nothing and returns when ctx is done.
func (s *Server) Run(ctx context.Context) error {
	if s.cfg.Port == 0 {
		<-ctx.Done()
		s.ready.terminating.Store(true)
		return nil
	}
	addr := net.JoinHostPort(s.cfg.ListenHost, strconv.Itoa(s.cfg.Port))
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("status server: listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln (which it closes) until ctx is done; see Run.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
	}
	s.cfg.Logger.Info("status server listening", "addr", ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
		served = nil
	}
	s.ready.terminating.Store(true)
	_ = hs.Close() // immediate: listener and connections; handlers see their context cancelled
	if served != nil {
		<-served
	}
	s.track.closeAndWait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("status server on %s: %w", ln.Addr(), err)
	}
	return nil
}

// tracker counts running handlers so that Serve returns only after the last one. Guarded by mu.
type tracker struct {
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup
	n      atomic.Int64 // handlers in flight, for tests and logs
}

func (t *tracker) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.mu.RLock()
		if t.closed {
			t.mu.RUnlock()
			http.Error(w, "status server is shutting down", http.StatusServiceUnavailable)
			return
		}
		t.wg.Add(1)
		t.mu.RUnlock()
		t.n.Add(1)
		defer func() { t.n.Add(-1); t.wg.Done() }()
		h.ServeHTTP(w, r)
	})
}

// running is the number of handlers in flight.
func (t *tracker) running() int64 { return t.n.Load() }

func (t *tracker) closeAndWait() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}
