// Package health runs the workload readiness probe of ProxyConfig.readinessProbe (set by Istio
// for VMs from a WorkloadGroup) and reports health changes, which the agent sends to Istiod as
// HealthInformation so it can mark the WorkloadEntry healthy or not.
//
// Semantics learned from Istio's agent (pkg/istio-agent/health): after the initial delay the
// probe runs at once and then every period, each attempt bounded by the timeout; Envoy's own
// readiness is checked first when Envoy runs. A change is reported only when the success
// (failure) threshold of consecutive results is reached and the last report was not already
// healthy (unhealthy); nothing is reported in between. Defaults: thresholds 1, timeout 1 s,
// period 10 s; HTTP path "/", scheme http, host localhost.
package health

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Prober checks the workload once; a nil error means healthy.
type Prober interface {
	Probe(ctx context.Context) error
}

// ProberFunc adapts a function to Prober.
type ProberFunc func(ctx context.Context) error

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context) error { return f(ctx) }

// Config configures a Checker. Zero values take Istio's defaults.
type Config struct {
	InitialDelay     time.Duration
	Timeout          time.Duration // default 1s
	Period           time.Duration // default 10s
	SuccessThreshold int           // default 1
	FailureThreshold int           // default 1
	// Envoy, when set, is checked before the application (Envoy's readiness).
	Envoy Prober
	// App is the configured probe (HTTP, TCP, gRPC or exec).
	App Prober
	// Report receives each change: healthy, or unhealthy with the probe's error text.
	Report func(healthy bool, message string)
	Log    *slog.Logger
}

// Checker runs the probe. Immutable after New.
type Checker struct{ cfg Config }

// New returns a Checker for cfg.
func New(cfg Config) (*Checker, error) {
	if cfg.App == nil {
		return nil, errors.New("health: no probe")
	}
	if cfg.Report == nil {
		return nil, errors.New("health: no report function")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Period <= 0 {
		cfg.Period = 10 * time.Second
	}
	cfg.SuccessThreshold = max(cfg.SuccessThreshold, 1)
	cfg.FailureThreshold = max(cfg.FailureThreshold, 1)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Checker{cfg: cfg}, nil
}

type state int

const (
	undefined state = iota
	healthy
	unhealthy
)

// Run probes until ctx is done.
func (c *Checker) Run(ctx context.Context) error {
	if c.cfg.InitialDelay > 0 {
		t := time.NewTimer(c.cfg.InitialDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	var successes, failures int
	last := undefined
	check := func() {
		err := c.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			successes, failures = successes+1, 0
			if successes >= c.cfg.SuccessThreshold && last != healthy {
				c.cfg.Log.Info("workload readiness probe: success threshold reached, reporting healthy")
				c.cfg.Report(true, "")
				successes, last = 0, healthy
			}
			return
		}
		failures, successes = failures+1, 0
		if failures >= c.cfg.FailureThreshold && last != unhealthy {
			c.cfg.Log.Info("workload readiness probe: failure threshold reached, reporting unhealthy", "err", err)
			c.cfg.Report(false, err.Error())
			failures, last = 0, unhealthy
		}
	}
	check()
	tick := time.NewTicker(c.cfg.Period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			check()
		}
	}
}

func (c *Checker) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if c.cfg.Envoy != nil {
		if err := c.cfg.Envoy.Probe(ctx); err != nil {
			return err
		}
	}
	return c.cfg.App.Probe(ctx)
}
