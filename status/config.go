// Package status is the agent's status server on STATUS_PORT (15020): Envoy and agent
// readiness (/healthz/ready), rewritten application probes (/app-health/, /app-lifecycle/), the
// merged Prometheus endpoint (/stats/prometheus, /metrics), /drain, /quitquitquit,
// /debug/ndsz and, with profiling, /debug/pprof/. Kubernetes sees the sidecar only through it.
package status

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/wingman-mesh/wingman/internal/metric"
)

// ReadyChecker reports whether a component has what it needs to serve (the DNS proxy: its
// first NameTable has arrived).
type ReadyChecker interface {
	Ready() bool
}

// Lifecycle is what /drain and /quitquitquit drive; the supervisor implements it.
type Lifecycle interface {
	// Drain asks Envoy to drain its listeners gracefully without exiting, and records that
	// draining is done so that a later termination kills Envoy at once.
	Drain(ctx context.Context) error
	// Quit starts an immediate shutdown: no drain, Envoy killed, the agent exits. It must not
	// wait for the status server to stop (it is called from one of its handlers).
	Quit()
}

// Config configures the status server. Library code: cmd/ fills it from flags and env.
type Config struct {
	// Port is STATUS_PORT (15020); 0 disables the server (Run just waits for ctx).
	Port int
	// ListenHost is the address to bind; "" binds all interfaces, IPv4 and IPv6.
	ListenHost string
	// LocalHost is the loopback address of Envoy's admin port for readiness: AdminLocalhost's
	// choice ("" is "127.0.0.1").
	LocalHost string
	// AdminPort is Envoy's admin port, read for readiness (0: 15000).
	AdminPort int
	// EnvoyPrometheusPort is ENVOY_PROMETHEUS_PORT, merged into /stats/prometheus (0: 15090).
	EnvoyPrometheusPort int
	// NoEnvoy is DISABLE_ENVOY: readiness skips Envoy and the merge leaves it out.
	NoEnvoy bool
	// SkipEnvoyStats is PILOT_AGENT_MERGE_ENVOY_STATS=false.
	SkipEnvoyStats bool
	// NodeType is the proxy type ("sidecar", "router", ...); application metrics are merged
	// only for sidecars ("" counts as sidecar).
	NodeType string

	// AppProbers is the raw ISTIO_KUBE_APP_PROBERS JSON.
	AppProbers string
	// ProbeTargetHost is where app probes go: the pod IP (INSTANCE_IP), or "localhost" with
	// REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION. "" means "localhost".
	ProbeTargetHost string
	// DisableHTTP2Probing is ISTIO_ENABLE_HTTP2_PROBING=false.
	DisableHTTP2Probing bool
	// ProbeKeepAlive is ENABLE_PROBE_KEEPALIVE_CONNECTIONS.
	ProbeKeepAlive bool

	// PrometheusAnnotations is the raw ISTIO_PROMETHEUS_ANNOTATIONS JSON ("" means none).
	PrometheusAnnotations string
	// AppMetricsHost is where application metrics are scraped ("" means "localhost").
	AppMetricsHost string
	// MetricsLocalhostOnly is METRICS_LOCALHOST_ACCESS_ONLY: non-local scrapers get 403.
	MetricsLocalhostOnly bool
	// MaxScrapeBytes bounds each merged target's body (0: 10 MiB).
	MaxScrapeBytes int64
	// ScrapeTimeout bounds one merged scrape when the scraper sends no shorter
	// X-Prometheus-Scrape-Timeout-Seconds (0: 10 s).
	ScrapeTimeout time.Duration

	// Profiling serves /debug/pprof/ to local callers (--profiling).
	Profiling bool

	// DNSEnabled makes readiness wait for DNS's first NameTable; DNS must then be set.
	DNSEnabled bool
	DNS        ReadyChecker
	// GRPCBootstrapPath is GRPC_XDS_BOOTSTRAP; "" skips its readiness check. When set,
	// CheckGRPCBootstrap must be set: it returns nil when the file parses and its
	// file_watcher certificate files exist.
	GRPCBootstrapPath  string
	CheckGRPCBootstrap func(path string) error

	// Lifecycle serves /drain and /quitquitquit; nil answers them with 503.
	Lifecycle Lifecycle
	// NDSZ returns the current NameTable as JSON for /debug/ndsz, or nil when there is none.
	NDSZ func() ([]byte, error)

	// Gatherer is the agent's own registry (see NewAgentRegistry), written first in the
	// merged metrics; nil leaves it out.
	Gatherer *metric.Registry
	// Registerer receives the server's own metrics (startup_duration_seconds, scrapes_total,
	// scrape_failures_total); it is expected to add the istio_agent_ prefix. Nil: none.
	Registerer *metric.Registry
	// ProcessStart is when the process started, for startup_duration_seconds.
	ProcessStart time.Time
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ReadinessTimeout bounds each Envoy admin request of a readiness check (0: 3 s, Istio's
	// PROXY_READINESS_PROBE_TIMEOUT default).
	ReadinessTimeout time.Duration
	// Logger receives the server's logs; nil discards.
	Logger *slog.Logger
	// ProbeLogger receives the application probes' logs (Istio's "probes" scope); nil: Logger.
	ProbeLogger *slog.Logger
}

func (c *Config) defaults() error {
	if c.Port < 0 || c.Port > 65535 {
		return errors.New("status: port out of range")
	}
	if c.AdminPort == 0 {
		c.AdminPort = 15000
	}
	if c.EnvoyPrometheusPort == 0 {
		c.EnvoyPrometheusPort = 15090
	}
	if c.AdminPort < 0 || c.AdminPort > 65535 || c.EnvoyPrometheusPort < 0 || c.EnvoyPrometheusPort > 65535 {
		return errors.New("status: Envoy admin or Prometheus port out of range")
	}
	if c.LocalHost == "" {
		c.LocalHost = "127.0.0.1"
	}
	if c.AppMetricsHost == "" {
		c.AppMetricsHost = "localhost"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ReadinessTimeout <= 0 {
		c.ReadinessTimeout = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ProbeLogger == nil {
		c.ProbeLogger = c.Logger
	}
	if c.DNSEnabled && c.DNS == nil {
		return errors.New("status: DNSEnabled needs a DNS ReadyChecker")
	}
	if c.GRPCBootstrapPath != "" && c.CheckGRPCBootstrap == nil {
		return errors.New("status: GRPCBootstrapPath needs CheckGRPCBootstrap")
	}
	return nil
}
