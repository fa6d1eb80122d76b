package cache

import (
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/wingman-mesh/wingman/internal/metric"
)

// Defaults, as Istio's pkg/wasm/options.go and pilot-agent's flags and features set them.
const (
	DefaultDir                   = "/var/lib/istio/data" // Istio: constants.IstioDataDir
	DefaultPurgeInterval         = time.Hour
	DefaultModuleExpiry          = 24 * time.Hour
	DefaultHTTPRequestTimeout    = 15 * time.Second
	DefaultHTTPRequestMaxRetries = 5
	DefaultMaxModuleBytes        = 256 << 20 // Istio: ISTIO_WASM_MAX_BINARY_SIZE_BYTES default
	// defaultPullTimeout applies when a remote source carries no timeout (Istio: 5s in
	// rewriteVMConfig; Istiod normally sets 30s).
	defaultPullTimeout = 5 * time.Second
)

// Options configure a Cache. Zero values take the defaults above.
type Options struct {
	// Dir holds the modules and their index. Created 0755 if missing.
	Dir string
	// PurgeInterval is how often modules unused for ModuleExpiry are removed
	// [WASM_PURGE_INTERVAL, WASM_MODULE_EXPIRY].
	PurgeInterval, ModuleExpiry time.Duration
	// HTTPRequestTimeout bounds each HTTP attempt [WASM_HTTP_REQUEST_TIMEOUT];
	// HTTPRequestMaxRetries is the number of attempts [WASM_HTTP_REQUEST_MAX_RETRIES] (Istio
	// makes at most that many attempts; 0 is taken as one attempt, Istio would make none).
	HTTPRequestTimeout    time.Duration
	HTTPRequestMaxRetries int
	// InsecureRegistries are hosts fetched without TLS verification, "*" for all
	// [WASM_INSECURE_REGISTRIES].
	InsecureRegistries []string
	// MaxModuleBytes caps a module, fetched and decompressed [ISTIO_WASM_MAX_BINARY_SIZE_BYTES].
	MaxModuleBytes int64
	// BlockedCIDRs are refused for every fetch connection, after DNS resolution, on top of
	// link-local and known cloud metadata addresses [BLOCKED_CIDRS_IN_WASM_FETCH].
	BlockedCIDRs []netip.Prefix
	Logger       *slog.Logger
	Registerer   *metric.Registry // nil: counted, not exported

	// initialBackoff is the first retry delay (Istio: 500ms); tests shorten it.
	initialBackoff time.Duration
	// now is the clock for expiry; tests move it.
	now func() time.Time
}

func (o *Options) setDefaults() error {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.PurgeInterval <= 0 {
		o.PurgeInterval = DefaultPurgeInterval
	}
	if o.ModuleExpiry <= 0 {
		o.ModuleExpiry = DefaultModuleExpiry
	}
	if o.HTTPRequestTimeout <= 0 {
		o.HTTPRequestTimeout = DefaultHTTPRequestTimeout
	}
	if o.HTTPRequestMaxRetries < 0 {
		return errors.New("cache: HTTPRequestMaxRetries must not be negative")
	}
	if o.HTTPRequestMaxRetries == 0 {
		o.HTTPRequestMaxRetries = 1
	}
	if o.MaxModuleBytes <= 0 {
		o.MaxModuleBytes = DefaultMaxModuleBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.initialBackoff <= 0 {
		o.initialBackoff = 500 * time.Millisecond
	}
	if o.now == nil {
		o.now = time.Now
	}
	return nil
}

// PullPolicy is the WasmPlugin's imagePullPolicy as Istiod passes it in the VM environment.
type PullPolicy int

const (
	PullUnspecified PullPolicy = iota
	PullIfNotPresent
	PullAlways
)

// GetOptions describe one module reference (Istio: GetOptions).
type GetOptions struct {
	// Checksum is the expected sha256 (hex): of the module for http(s), of the image manifest
	// for oci. Empty: not verified (an oci URL's @sha256: digest is used when present).
	Checksum        string
	ResourceName    string // the ECDS resource asking, for the Always policy
	ResourceVersion string // the WasmPlugin's resource version, for the Always policy
	Timeout         time.Duration
	PullSecret      []byte // a docker config JSON (kubernetes.io/dockerconfigjson)
	PullPolicy      PullPolicy
}
