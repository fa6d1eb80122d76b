package probe

import (
	"fmt"
	"log/slog"
	"net/http"
)

// Config configures a Prober.
type Config struct {
	// Actions is the parsed ISTIO_KUBE_APP_PROBERS document (see Parse).
	Actions map[string]*Action
	// TargetHost is where every probe goes, whatever host the probe names (as Istio): the
	// pod IP (INSTANCE_IP), or "localhost" with REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION.
	// Empty means "localhost".
	TargetHost string
	// StatusPort is the status server's port: an incoming Host header naming it is rewritten
	// to the probed port.
	StatusPort int
	// DisableHTTP2 turns off HTTP/2 for HTTPS probes (ISTIO_ENABLE_HTTP2_PROBING=false).
	DisableHTTP2 bool
	// KeepAlive keeps probe connections open between probes
	// (ENABLE_PROBE_KEEPALIVE_CONNECTIONS); kubelet, and the default, do not.
	KeepAlive bool
	// NoSourceAddress dials from the kernel's chosen source instead of trying 127.0.0.6 first.
	NoSourceAddress bool
	// Logger receives failed HTTP and gRPC probes at error level in Istio's words (TCP failures,
	// which Istio does not log, at debug); nil discards.
	Logger *slog.Logger
}

// Prober answers rewritten probe paths. Immutable after New; safe for concurrent use.
type Prober struct {
	handlers map[string]http.Handler
}

// New builds a Prober with one handler (and, for httpGet, one cached client) per path.
func New(cfg Config) (*Prober, error) {
	if cfg.TargetHost == "" {
		cfg.TargetHost = "localhost"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := dialer{noSource: cfg.NoSourceAddress}
	p := &Prober{handlers: make(map[string]http.Handler, len(cfg.Actions))}
	for path, a := range cfg.Actions {
		if a == nil || a.Path != path {
			return nil, fmt.Errorf("app probers: action for %q is missing or names another path", path)
		}
		switch {
		case a.HTTP != nil:
			p.handlers[path] = newHTTPProbe(a, cfg, d)
		case a.TCP != nil || a.GRPC != nil:
			p.handlers[path] = &socketProbe{action: a, host: cfg.TargetHost, dial: d, log: cfg.Logger}
		default:
			return nil, fmt.Errorf("app probers: container %q, probe %q: no action", a.Container, path)
		}
	}
	return p, nil
}

// ServeHTTP runs the probe configured for r.URL.Path; an unknown path is a 400, as in Istio.
func (p *Prober) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := p.handlers[r.URL.Path]
	if !ok {
		http.Error(w, fmt.Sprintf("app probe config does not exist for %q", r.URL.Path), http.StatusBadRequest)
		return
	}
	h.ServeHTTP(w, r)
}

// Len is the number of configured probe paths.
func (p *Prober) Len() int { return len(p.handlers) }
