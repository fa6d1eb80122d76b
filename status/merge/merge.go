package merge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wingman-mesh/wingman/internal/metric"
)

// Defaults for the per-target bounds.
const (
	DefaultMaxBytes = 10 << 20
	DefaultTimeout  = 10 * time.Second
	bufSize         = 32 << 10
)

// AgentMetrics writes the agent's own metrics in Prometheus' text format.
type AgentMetrics interface {
	WriteText(w io.Writer) error
}

// Config configures a Merger.
type Config struct {
	// Agent is the agent's own registry, written first in text format; nil skips it.
	Agent AgentMetrics
	// EnvoyURL is Envoy's Prometheus endpoint (http://localhost:15090/stats/prometheus);
	// "" skips Envoy. The scraper's query string is appended.
	EnvoyURL string
	// AppURLs are the application endpoints, written last in the given order.
	AppURLs []string
	// MaxBytes bounds each target's body (default 10 MiB); a longer body is cut at a line end.
	MaxBytes int64
	// Timeout bounds one whole scrape of the targets (default 10 s); a scraper's
	// X-Prometheus-Scrape-Timeout-Seconds lowers it.
	Timeout time.Duration
	// Registerer receives scrapes_total and scrape_failures_total{type}; it is expected to add
	// the istio_agent_ prefix. Nil registers nothing.
	Registerer *metric.Registry
	// Logger receives scrape failures at debug level; nil discards.
	Logger *slog.Logger
}

// Merger serves the merged metrics endpoint. Immutable after New; safe for concurrent use.
type Merger struct {
	cfg      Config
	client   *http.Client
	scrapes  *metric.Counter
	failures *metric.CounterVec
}

// Failure kinds, the values of scrape_failures_total's type label.
const (
	FailEnvoy = "envoy"
	FailApp   = "application"
	FailAgent = "agent"
)

// New builds a Merger and registers its counters.
func New(cfg Config) (*Merger, error) {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Merger{
		cfg: cfg,
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // loopback targets; never an environment proxy
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			DisableCompression:  true, // loopback: decompressing would only cost CPU
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
		}},
		// Get-or-create: a second Merger on the same registry counts into the same series.
		scrapes:  cfg.Registerer.Counter("scrapes_total", "The total number of scrapes of the merged metrics endpoint."),
		failures: cfg.Registerer.CounterVec("scrape_failures_total", "The total number of failed scrapes, by source.", "type"),
	}
	return m, nil
}

// upstream is one target's response (or failure) for one scrape.
type upstream struct {
	kind string
	url  string
	resp *http.Response
	err  error
}

// bufPool holds the copy buffers: one 32 KiB buffer per scrape in flight.
var bufPool = sync.Pool{New: func() any { return new([bufSize]byte) }}

// ServeHTTP answers one scrape: targets are requested concurrently, then the agent section,
// Envoy's body and each application body are streamed out in that order.
func (m *Merger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.scrapes.Inc()
	ctx, cancel := context.WithTimeout(r.Context(), m.timeout(r))
	defer cancel()

	ups := make([]upstream, 0, 1+len(m.cfg.AppURLs))
	if m.cfg.EnvoyURL != "" {
		u := m.cfg.EnvoyURL
		if r.URL.RawQuery != "" {
			u += "?" + r.URL.RawQuery
		}
		ups = append(ups, upstream{kind: FailEnvoy, url: u})
	}
	for _, u := range m.cfg.AppURLs {
		ups = append(ups, upstream{kind: FailApp, url: u})
	}
	m.fetchAll(ctx, r, ups)
	defer func() {
		for _, u := range ups {
			if u.resp != nil {
				u.resp.Body.Close()
			}
		}
	}()

	// The response is OpenMetrics only when every application body is (Envoy speaks text,
	// which OpenMetrics parsers accept); otherwise text.
	contentType, openMetrics := TextFormat, false
	for _, u := range ups {
		if u.kind != FailApp || u.resp == nil {
			continue
		}
		ct := u.resp.Header.Get("Content-Type")
		if !isOpenMetrics(ct) {
			contentType, openMetrics = TextFormat, false
			break
		}
		if !openMetrics {
			contentType, openMetrics = ct, true
		}
	}
	w.Header().Set("Content-Type", contentType)

	if m.cfg.Agent != nil {
		if err := m.writeAgent(w); err != nil {
			m.fail(FailAgent, "agent", err)
		}
	}
	buf := bufPool.Get().(*[bufSize]byte)
	defer bufPool.Put(buf)
	for _, u := range ups {
		if u.resp == nil {
			continue
		}
		// An OpenMetrics body loses its "# EOF" whatever the response format: one is re-added
		// at the very end when the response is OpenMetrics.
		om := u.kind == FailApp && isOpenMetrics(u.resp.Header.Get("Content-Type"))
		if _, err := copyLines(w, u.resp.Body, m.cfg.MaxBytes, om, buf[:]); err != nil {
			m.fail(u.kind, u.url, fmt.Errorf("streaming body: %w", err))
		}
	}
	if openMetrics {
		io.WriteString(w, "# EOF\n")
	}
}

// fetchAll sends every upstream request at once and waits for all response headers (each
// bounded by ctx). Failed or non-2xx targets are counted and left without a response.
func (m *Merger) fetchAll(ctx context.Context, in *http.Request, ups []upstream) {
	var wg sync.WaitGroup
	for i := range ups {
		wg.Go(func() {
			u := &ups[i]
			u.resp, u.err = m.get(ctx, in, u)
		})
	}
	wg.Wait()
	for i := range ups {
		if u := &ups[i]; u.err != nil {
			m.fail(u.kind, u.url, u.err)
		}
	}
}

func (m *Merger) get(ctx context.Context, in *http.Request, u *upstream) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url, nil)
	if err != nil {
		return nil, err
	}
	if a := filterAccept(in.Header.Get("Accept"), u.kind == FailApp); a != "" {
		req.Header.Set("Accept", a)
	}
	for _, h := range []string{"User-Agent", "X-Prometheus-Scrape-Timeout-Seconds"} {
		if v := in.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body.Close()
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	return resp, nil
}

func (m *Merger) writeAgent(w io.Writer) error { return m.cfg.Agent.WriteText(w) }

func (m *Merger) fail(kind, what string, err error) {
	m.failures.With(kind).Inc()
	if errors.Is(err, context.Canceled) {
		return // the scraper went away
	}
	m.cfg.Logger.Debug("merged metrics: source failed", "type", kind, "source", what, "error", err)
}

// timeout is the scrape's bound: the configured one, lowered by the scraper's own.
func (m *Merger) timeout(r *http.Request) time.Duration {
	t := m.cfg.Timeout
	if v := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
			if d := time.Duration(s * float64(time.Second)); d < t {
				t = d
			}
		}
	}
	return t
}
