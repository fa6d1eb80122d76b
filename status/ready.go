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
	lastOK      atomic.Bool // for logging transitions only

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
		return errors.New("DNS lookup table not yet received")
	}
	r.startupOnce.Do(r.recordStartup)
	return nil
}

func (r *readiness) checkConfig(st *envoyStats) error {
	if r.configOK.Load() {
		return nil
	}
	cds, lds := st.cdsSuccess > 0, st.ldsSuccess > 0
	switch {
	case cds && lds:
		r.configOK.Store(true)
		return nil
	case st.cdsRejected > 0 || st.ldsRejected > 0:
		return fmt.Errorf("config received from XDS server, but was rejected: %s", st)
	case !cds && !lds:
		return fmt.Errorf("config not received from XDS server (is Istiod running?): %s", st)
	default:
		return fmt.Errorf("config not fully received from XDS server: %s", st)
	}
}

func (r *readiness) checkLive(st *envoyStats) error {
	if r.liveOK.Load() {
		return nil
	}
	switch {
	case !st.stateFound:
		return errors.New("server.state is not yet updated")
	case st.state != 0:
		return fmt.Errorf("server is not live, current state is: %s", serverStateName(st.state))
	case !st.workersFound || st.workersStarted != 1:
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

func (r *readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if err := r.check(req.Context()); err != nil {
		if r.lastOK.Swap(false) {
			r.cfg.Logger.Warn("proxy is no longer ready", "reason", err)
		}
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if !r.lastOK.Swap(true) {
		r.cfg.Logger.Info("proxy is ready")
	}
	w.WriteHeader(http.StatusOK)
}
