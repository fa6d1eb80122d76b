package status

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
)

// errTerminated is readiness once shutdown has begun.
var errTerminated = errors.New("server is terminated")

// readiness computes /healthz/ready. Fields are immutable after newReadiness except the
// latches and flags, which are atomic; concurrent checks may both query Envoy before the
// first success is latched, which is harmless.
type readiness struct {
	cfg   *Config
	admin *adminClient // nil with NoEnvoy

	configOK    atomic.Bool // CDS and LDS accepted once: latched (Istio)
	liveOK      atomic.Bool // LIVE with workers started once: latched (Istio)
	terminating atomic.Bool
	lastOK      atomic.Bool // the last check succeeded: "ready" is logged once per recovery

	startupOnce sync.Once
}

func newReadiness(cfg *Config) *readiness {
	r := &readiness{cfg: cfg}
	if !cfg.NoEnvoy {
		r.admin = newAdminClient(cfg.LocalHost, cfg.AdminPort, cfg.ReadinessTimeout)
	}
	return r
}

// check runs Istio's probes in order: Envoy (config received, then LIVE with workers), the
// gRPC bootstrap, then the DNS table. It returns why the agent is not ready, or nil.
func (r *readiness) check(ctx context.Context) error {
	if r.terminating.Load() {
		return errTerminated
	}
	if r.admin != nil && !(r.configOK.Load() && r.liveOK.Load()) {
		st, err := r.admin.fetch(ctx)
		if err != nil {
			if r.configOK.Load() {
				// Istio reads the state with a second query once config has arrived
				// (status/ready/probe.go checkEnvoyStats at 1.30.3).
				return fmt.Errorf("failed to get readiness stats: %w", err)
			}
			return err
		}
		if err := r.checkConfig(&st); err != nil {
			return err
		}
		if err := r.checkLive(&st); err != nil {
			return err
		}
	}
	if p := r.cfg.GRPCBootstrapPath; p != "" {
		if err := r.cfg.CheckGRPCBootstrap(p); err != nil {
			return fmt.Errorf("grpc bootstrap %s: %w", p, err)
		}
	}
	if r.cfg.DNSEnabled && !r.cfg.DNS.Ready() {
		return errors.New("istio DNS capture is turned ON and DNS lookup table is not ready yet") // pkg/istio-agent/agent.go Check at 1.30.3
	}
	r.startupOnce.Do(r.recordStartup)
	return nil
}

func (r *readiness) checkConfig(st *envoyStats) error {
	if r.configOK.Load() {
		return nil
	}
	cds, lds := st.cdsSuccess > 0, st.ldsSuccess > 0
	// Istio's order (status/ready/probe.go checkConfigStatus at 1.30.3): nothing received first,
	// then rejections.
	switch {
	case cds && lds:
		r.configOK.Store(true)
		return nil
	case !cds && !lds:
		return fmt.Errorf("config not received from XDS server (is Istiod running?): %s", st)
	case st.cdsRejected > 0 || st.ldsRejected > 0:
		return fmt.Errorf("config received from XDS server, but was rejected: %s", st)
	default:
		return fmt.Errorf("config not fully received from XDS server: %s", st)
	}
}

func (r *readiness) checkLive(st *envoyStats) error {
	if r.liveOK.Load() {
		return nil
	}
	// Istio's checks and messages (status/ready/probe.go checkEnvoyStats and status/util/stats.go
	// GetReadinessStats at 1.30.3).
	switch {
	case !st.stateFound:
		return fmt.Errorf("failed to get readiness stats: server.state is not yet updated: %s", st.readinessStats())
	case !st.workersFound:
		return fmt.Errorf("failed to get readiness stats: listener_manager.workers_started is not yet updated: %s", st.readinessStats())
	case st.state != 0:
		return fmt.Errorf("server is not live, current state is: %s", serverStateName(st.state))
	case st.workersStarted != 1:
		return errors.New("workers have not yet started")
	}
	r.liveOK.Store(true)
	return nil
}

// recordStartup registers startup_duration_seconds at the first success (Istio shows only
// instruments that were recorded).
func (r *readiness) recordStartup() {
	if r.cfg.Registerer == nil || r.cfg.ProcessStart.IsZero() {
		return
	}
	r.cfg.Registerer.Gauge("startup_duration_seconds",
		"The time from the process start to the first successful readiness check.").Set(r.cfg.Now().Sub(r.cfg.ProcessStart).Seconds())
}

// ServeHTTP is /healthz/ready. Every failed check is logged, and the first success after a
// failure (or the first one), in the default scope, as Istio's handleReadyProbe
// (pilot/cmd/pilot-agent/status/server.go at 1.30.3).
func (r *readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if err := r.check(req.Context()); err != nil {
		r.lastOK.Store(false)
		r.cfg.Logger.Warn("Envoy proxy is NOT ready: " + err.Error())
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if !r.lastOK.Swap(true) {
		r.cfg.Logger.Info("Envoy proxy is ready")
	}
	w.WriteHeader(http.StatusOK)
}
