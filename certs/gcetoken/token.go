// Package gcetoken keeps the agent's credential file filled with a Google Compute Engine VM
// identity token, for CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine (VMs joining the mesh without a
// Kubernetes service-account token).
//
// Behaviour learned from Istio's agent (security/pkg/credentialfetcher/plugin/gce.go): the token
// is the metadata server's instance identity JWT for the default service account, requested with
// the trust domain as audience and format=full, written to the token path that the CA client and
// the xDS upstream read on every call (mode 0640); it is checked every 5 minutes and fetched again
// once less than 25 minutes of its life remain (or when its expiry cannot be read).
package gcetoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/wingman-mesh/wingman/internal/clock"

	"github.com/wingman-mesh/wingman/internal/atomicfile"
)

// DefaultMetadataHost is the metadata server's address when GCE_METADATA_HOST is unset.
const DefaultMetadataHost = "169.254.169.254"

const (
	defaultCheckInterval = 5 * time.Minute
	defaultGrace         = 25 * time.Minute
	maxTokenBytes        = 64 << 10
)

// Config configures a Fetcher. Zero durations take Istio's values.
type Config struct {
	MetadataHost  string // host[:port] of the metadata server (GCE_METADATA_HOST)
	Audience      string // the trust domain
	Path          string // token file the CA client and xDS upstream read
	CheckInterval time.Duration
	Grace         time.Duration
	Client        *http.Client
	Log           *slog.Logger
	Clock         clock.Clock // nil → the real clock
}

// Fetcher fetches the identity token and keeps the file fresh. Config is immutable after New;
// exp is guarded by mu.
type Fetcher struct {
	cfg Config

	mu  sync.Mutex
	exp time.Time // expiry of the token on disk; zero when unknown
}

// New returns a Fetcher for cfg.
func New(cfg Config) (*Fetcher, error) {
	if cfg.Audience == "" {
		return nil, errors.New("gce token: empty audience (TRUST_DOMAIN)")
	}
	if cfg.Path == "" {
		return nil, errors.New("gce token: empty token path")
	}
	if cfg.MetadataHost == "" {
		cfg.MetadataHost = DefaultMetadataHost
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = defaultCheckInterval
	}
	if cfg.Grace <= 0 {
		cfg.Grace = defaultGrace
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	return &Fetcher{cfg: cfg}, nil
}

// URL is the identity endpoint the token is requested from.
func (f *Fetcher) URL() string {
	q := url.Values{"audience": {f.cfg.Audience}, "format": {"full"}}
	return "http://" + f.cfg.MetadataHost + "/computeMetadata/v1/instance/service-accounts/default/identity?" + q.Encode()
}

// Fetch requests a token and writes it to the token file (atomically: readers see the old or the
// new token, never a partial one).
func (f *Fetcher) Fetch(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL(), nil)
	if err != nil {
		return fmt.Errorf("gce token: %w", err)
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("gce token from metadata server %s: %w", f.cfg.MetadataHost, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenBytes+1))
	if err != nil {
		return fmt.Errorf("gce token from metadata server %s: %w", f.cfg.MetadataHost, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("gce token from metadata server %s: %s: %.200s", f.cfg.MetadataHost, resp.Status, body)
	}
	if len(body) > maxTokenBytes {
		return fmt.Errorf("gce token from metadata server %s: larger than %d bytes", f.cfg.MetadataHost, maxTokenBytes)
	}
	token := strings.TrimSpace(string(body))
	if token == "" {
		return fmt.Errorf("gce token from metadata server %s: empty answer", f.cfg.MetadataHost)
	}
	if err := atomicfile.Write(f.cfg.Path, []byte(token), 0o640, atomicfile.Options{}); err != nil {
		return fmt.Errorf("gce token: writing %s: %w", f.cfg.Path, err)
	}
	exp, _ := Expiry(token)
	f.mu.Lock()
	f.exp = exp
	f.mu.Unlock()
	f.cfg.Log.Debug("gce identity token written", "path", f.cfg.Path, "bytes", len(token), "expires", exp)
	return nil
}

// due reports whether the token on disk must be fetched again at now.
func (f *Fetcher) due(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exp.IsZero() || now.After(f.exp.Add(-f.cfg.Grace))
}

// Run checks the token every CheckInterval and fetches it when due; until the first fetch
// succeeds it retries with backoff (1 s doubling to the check interval). It returns when ctx ends.
func (f *Fetcher) Run(ctx context.Context) error {
	backoff := time.Second
	for {
		wait := f.cfg.CheckInterval
		if f.due(f.cfg.Clock.Now()) {
			if err := f.Fetch(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				f.cfg.Log.Warn("refreshing the GCE identity token failed; retrying", "err", err, "in", backoff)
				wait = min(backoff, f.cfg.CheckInterval)
				backoff *= 2
			} else {
				backoff = time.Second
			}
		}
		t := f.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// Expiry returns a JWT's exp claim (no signature check: the token is ours, only its lifetime
// matters here).
func Expiry(token string) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("not a JWT: want three dot-separated parts")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, fmt.Errorf("JWT payload: %w", err)
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, fmt.Errorf("JWT payload: %w", err)
	}
	if claims.Exp == nil {
		return time.Time{}, errors.New("JWT has no exp claim")
	}
	secs, err := claims.Exp.Float64()
	if err != nil || secs <= 0 || secs > 1<<40 {
		return time.Time{}, fmt.Errorf("JWT exp %q is not a plausible Unix time", claims.Exp.String())
	}
	return time.Unix(int64(secs), 0), nil
}
