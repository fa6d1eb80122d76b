package meshlab

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// ResourcesDir is the folder of resource files (required). It is watched for changes.
	ResourcesDir string
	// OutputDir, when set, is the root directory under which the agent's files are written:
	// var/run/secrets/istio/root-cert.pem and var/run/secrets/tokens/istio-token.
	OutputDir string
	// Token is the bearer token xDS and CA callers must present (default: a random one).
	Token string
	// CertTTL caps the workload certificates' validity (default 24h).
	CertTTL time.Duration
	// Debounce is how long the watcher waits after a change before reloading (default 100ms),
	// so that an editor's write-rename-chmod counts as one change.
	Debounce time.Duration
	// Clock gives the CA's signing time (default time.Now).
	Clock func() time.Time
	// OnLoad, when set, is called after every load attempt (the first one and each reload),
	// from the goroutine that loaded. It must not block for long.
	OnLoad func(LoadResult)
	// OnPush, when set, is called for every xDS response sent, from the stream's goroutine.
	// It must not block.
	OnPush func(Push)
	// Logger receives loads, rejections, streams and refused requests (nil → discard).
	Logger *slog.Logger
	// Registerer, when set, receives meshlab's metrics.
	Registerer prometheus.Registerer
}

// LoadResult is the outcome of one load of the resources folder.
type LoadResult struct {
	// Version is the version being served after this load: it grows by one on every
	// successful load and stays the same after a rejected one.
	Version uint64
	// Counts lists the resources served, e.g. "Listener=2 Cluster=3".
	Counts string
	// Err is why the load was rejected (a *FileError for a bad file); nil when accepted.
	Err error
}

// Push describes one xDS response meshlab sent.
type Push struct {
	TypeURL   string
	Node      string // the node id of the stream
	Resources int
	Delta     bool
}

func (c *Config) setDefaults() {
	if c.CertTTL <= 0 {
		c.CertTTL = 24 * time.Hour
	}
	if c.Debounce <= 0 {
		c.Debounce = 100 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}
