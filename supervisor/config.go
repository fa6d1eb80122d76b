package supervisor

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/wingman-mesh/wingman/internal/clock"
)

// Defaults applied by New to zero fields of Config. They are Istio's values unless noted.
const (
	DefaultBinaryPath        = "/usr/local/bin/envoy"
	DefaultDrainDuration     = 45 * time.Second
	DefaultFileFlush         = time.Second
	DefaultTerminationDrain  = 5 * time.Second
	DefaultMinDrain          = 5 * time.Second
	DefaultStatsPollInterval = time.Second
	DefaultStatsTimeout      = 2 * time.Second
	DefaultMaxStatsErrors    = 5
	// DefaultMaxDrain bounds the EXIT_ON_ZERO_ACTIVE_CONNECTIONS wait (Wingman only: Istio has no
	// bound other than kubelet's SIGKILL).
	DefaultMaxDrain = 5 * time.Minute
	// ProxyUID and ProxyGID are the identity Envoy runs as when Config.RunAsProxyUser is set.
	ProxyUID = 1337
	ProxyGID = 1337
)

// Config is everything the supervisor needs; cmd/pilot-agent fills it from flags, environment
// and ProxyConfig. The supervisor reads no environment variable itself.
type Config struct {
	// BinaryPath is ProxyConfig.binaryPath [DefaultBinaryPath].
	BinaryPath string
	// BootstrapPath is the rendered bootstrap passed with -c. Required.
	BootstrapPath string
	// RemoveBootstrapOnExit deletes BootstrapPath once Envoy is gone, as Istio does.
	RemoveBootstrapOnExit bool

	// Envoy command line (see Args for the order).
	DrainDuration      time.Duration // ProxyConfig.drainDuration → --drain-time-s [45s]
	NodeIPs            []string      // all IPv6 → --local-address-ip-version v6
	FileFlushInterval  time.Duration // ProxyConfig.fileFlushInterval [1s]
	FileFlushMinSizeKB int           // ProxyConfig.fileFlushMinSizeKb; 0 → not passed
	LogLevel           string        // --proxyLogLevel; may embed component levels "info,misc:error"
	ComponentLogLevel  string        // --proxyComponentLogLevel, used when LogLevel has no a:b parts
	SkipDeprecatedLogs bool          // ENVOY_SKIP_DEPRECATED_LOGS
	EnableCoreDump     bool          // ISTIO_ENVOY_ENABLE_CORE_DUMP
	ConfigYAML         string        // JSON of ISTIO_BOOTSTRAP_OVERRIDE (see BootstrapOverrideJSON)
	Concurrency        int           // > 0 → --concurrency

	// Process.
	Env            []string // Envoy's environment; nil → the agent's own
	RunAsProxyUser bool     // run Envoy as ProxyUID/ProxyGID (agent is root and DNS on :53)
	Stdout, Stderr *os.File // nil → /dev/null
	// ReapOrphans makes Run reap every exited child (the agent is PID 1), delivering Envoy's own
	// status to Run. Only one supervisor may reap in a process, and no other code in the process
	// may wait for children while it does.
	ReapOrphans bool

	// Admin API and shutdown.
	AdminHost string // "127.0.0.1" [default] or "::1" for IPv6-only pods
	AdminPort int    // ProxyConfig.proxyAdminPort. Required.
	// Sidecar adds &inboundonly to drain_listeners.
	Sidecar bool
	// TerminationDrainDuration is how long a SIGTERM drain lasts before Envoy is killed [5s].
	TerminationDrainDuration time.Duration
	// ExitOnZeroActiveConnections switches to polling Envoy's downstream_cx_active after
	// MinDrainDuration [5s] and stopping Envoy at zero, or at MaxDrainDuration [5m] at the latest.
	ExitOnZeroActiveConnections bool
	MinDrainDuration            time.Duration
	MaxDrainDuration            time.Duration
	// Ports whose listeners are not counted as active connections: ENVOY_STATUS_PORT,
	// ENVOY_PROMETHEUS_PORT and the secure metrics ports (0 → ignored).
	ExcludedListenerPorts []int
	StatsPollInterval     time.Duration // [1s]
	StatsTimeout          time.Duration // per stats request [2s]
	MaxStatsErrors        int           // consecutive failures that end the drain [5]

	Clock  clock.Clock  // nil → the real clock
	Logger *slog.Logger // nil → discard
}

// withDefaults returns c with defaults filled and checks what has no default.
func (c Config) withDefaults() (Config, error) {
	if c.BinaryPath == "" {
		c.BinaryPath = DefaultBinaryPath
	}
	if c.DrainDuration == 0 {
		c.DrainDuration = DefaultDrainDuration
	}
	if c.FileFlushInterval == 0 {
		c.FileFlushInterval = DefaultFileFlush
	}
	if c.AdminHost == "" {
		c.AdminHost = "127.0.0.1"
	}
	if c.TerminationDrainDuration == 0 {
		c.TerminationDrainDuration = DefaultTerminationDrain
	}
	if c.MinDrainDuration == 0 {
		c.MinDrainDuration = DefaultMinDrain
	}
	if c.MaxDrainDuration == 0 {
		c.MaxDrainDuration = DefaultMaxDrain
	}
	if c.StatsPollInterval == 0 {
		c.StatsPollInterval = DefaultStatsPollInterval
	}
	if c.StatsTimeout == 0 {
		c.StatsTimeout = DefaultStatsTimeout
	}
	if c.MaxStatsErrors == 0 {
		c.MaxStatsErrors = DefaultMaxStatsErrors
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if c.BootstrapPath == "" {
		errs = append(errs, errors.New("supervisor: BootstrapPath is empty"))
	}
	if c.AdminPort <= 0 || c.AdminPort > 65535 {
		errs = append(errs, fmt.Errorf("supervisor: admin port %d out of range 1-65535", c.AdminPort))
	}
	for name, d := range map[string]time.Duration{
		"drain duration": c.DrainDuration, "termination drain duration": c.TerminationDrainDuration,
		"minimum drain duration": c.MinDrainDuration, "maximum drain duration": c.MaxDrainDuration,
		"file flush interval": c.FileFlushInterval, "stats poll interval": c.StatsPollInterval,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("supervisor: %s %v is negative", name, d))
		}
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("supervisor: concurrency %d is negative", c.Concurrency))
	}
	return c, errors.Join(errs...)
}
