package merge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wingman-mesh/wingman/internal/metric"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// agentRegistry is a registry with the istio_agent_ prefix and one recorded counter.
func agentRegistry(t testing.TB) (*metric.Registry, *metric.Registry) {
	t.Helper()
	reg := metric.NewRegistry()
	wrapped := reg.WithPrefix("istio_agent_")
	wrapped.Counter("xds_proxy_requests", "requests").Add(3)
	return reg, wrapped
}

// counterValue reads a counter, optionally the series of one "type" label value.
func counterValue(t testing.TB, r *metric.Registry, name, label string) float64 {
	t.Helper()
	var labels []string
	if label != "" {
		labels = []string{"type", label}
	}
	v, _ := r.Value(name, labels...)
	return v
}

type seenReq struct {
	accept, ua, timeout, query string
}

func metricsServer(t testing.TB, contentType, body string, seen chan<- seenReq) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen != nil {
			seen <- seenReq{r.Header.Get("Accept"), r.UserAgent(), r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"), r.URL.RawQuery}
		}
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s.URL
}

func scrape(t testing.TB, h http.Handler, hdr http.Header, query string) (string, string) {
	t.Helper()
	front := httptest.NewServer(h)
	defer front.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, front.URL+"/stats/prometheus"+query, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("scrape status %d", resp.StatusCode)
	}
	return resp.Header.Get("Content-Type"), string(b)
}

func TestMergeOpenMetrics(t *testing.T) {
	reg, wrapped := agentRegistry(t)
	envoySeen, appSeen := make(chan seenReq, 1), make(chan seenReq, 1)
	envoy := metricsServer(t, "text/plain; version=0.0.4", "# TYPE envoy_x counter\nenvoy_x 1\n", envoySeen)
	omCT := "application/openmetrics-text; version=1.0.0; charset=utf-8"
	app := metricsServer(t, omCT, "# TYPE app_y counter\napp_y_total 2\n# EOF\n", appSeen)
	m, err := New(Config{Agent: reg, EnvoyURL: envoy + "/stats/prometheus", AppURLs: []string{app + "/metrics"}, Registerer: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	accept := "application/vnd.google.protobuf;q=0.7,application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3"
	ct, body := scrape(t, m, http.Header{"Accept": {accept}, "User-Agent": {"Prometheus/3"}, "X-Prometheus-Scrape-Timeout-Seconds": {"5"}}, "?usedonly")
	if ct != omCT {
		t.Errorf("Content-Type %q, want the app's %q", ct, omCT)
	}
	ia, ie, ip := strings.Index(body, "istio_agent_xds_proxy_requests 3"), strings.Index(body, "envoy_x 1"), strings.Index(body, "app_y_total 2")
	if ia < 0 || ie < ia || ip < ie {
		t.Errorf("want agent, Envoy, then app sections; got:\n%s", body)
	}
	if strings.Count(body, "# EOF") != 1 || !strings.HasSuffix(body, "\n# EOF\n") {
		t.Errorf("want exactly one trailing # EOF:\n%s", body)
	}
	e, a := <-envoySeen, <-appSeen
	if e.query != "usedonly" || e.ua != "Prometheus/3" || e.timeout != "5" || strings.Contains(e.accept, "openmetrics") || strings.Contains(e.accept, "protobuf") {
		t.Errorf("Envoy request %+v", e)
	}
	if !strings.Contains(a.accept, "openmetrics") || strings.Contains(a.accept, "protobuf") || a.query != "" {
		t.Errorf("app request %+v", a)
	}
	if n := counterValue(t, reg, "istio_agent_scrapes_total", ""); n != 1 {
		t.Errorf("scrapes_total = %v", n)
	}
}

func TestMergeFailuresNeverFailTheScrape(t *testing.T) {
	reg, wrapped := agentRegistry(t)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>oops</html>", http.StatusInternalServerError)
	}))
	defer bad.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + ln.Addr().String() + "/metrics"
	ln.Close()
	textApp := metricsServer(t, "text/plain; version=0.0.4", "app_z 1", nil)
	m, err := New(Config{Agent: reg, EnvoyURL: bad.URL, AppURLs: []string{down, textApp}, Registerer: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	ct, body := scrape(t, m, nil, "")
	if ct != TextFormat || strings.Contains(body, "oops") || !strings.HasSuffix(body, "app_z 1\n") || !strings.Contains(body, "istio_agent_xds_proxy_requests") {
		t.Errorf("Content-Type %q body:\n%s", ct, body)
	}
	if e, a := counterValue(t, reg, "istio_agent_scrape_failures_total", FailEnvoy), counterValue(t, reg, "istio_agent_scrape_failures_total", FailApp); e != 1 || a != 1 {
		t.Errorf("failures envoy=%v application=%v, want 1 and 1", e, a)
	}
}

// endless writes metric lines until the client goes away.
func endless(t testing.TB, every time.Duration) string {
	t.Helper()
	line := []byte("app_endless_metric{label=\"some value\"} 12345\n")
	block := bytes.Repeat(line, 1000)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for r.Context().Err() == nil {
			chunk := block
			if every > 0 {
				chunk = line
				select {
				case <-r.Context().Done():
				case <-time.After(every):
				}
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(s.Close)
	return s.URL
}

func TestEndlessBodyCutAtSizeBound(t *testing.T) {
	reg, wrapped := agentRegistry(t)
	const bound = 1 << 20
	m, err := New(Config{AppURLs: []string{endless(t, 0)}, MaxBytes: bound, Registerer: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	_, body := scrape(t, m, nil, "")
	if len(body) > bound || len(body) < bound-100 || !strings.HasSuffix(body, "12345\n") {
		t.Errorf("body of %d bytes (bound %d), tail %q", len(body), bound, body[max(0, len(body)-20):])
	}
	if n := counterValue(t, reg, "istio_agent_scrape_failures_total", FailApp); n != 1 {
		t.Errorf("application failures = %v, want 1", n)
	}
}

func TestEndlessBodyCutAtTimeBound(t *testing.T) {
	_, wrapped := agentRegistry(t)
	m, err := New(Config{AppURLs: []string{endless(t, time.Millisecond)}, Timeout: 300 * time.Millisecond, Registerer: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, body := scrape(t, m, nil, "")
	// A bound on a wait that must end (the body never does), not a measure of the 300 ms.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("scrape of a trickling body took %v, want about the 300 ms bound", d)
	}
	if body == "" || !strings.HasSuffix(body, "12345\n") {
		t.Errorf("want whole lines up to the deadline, got %d bytes ending %q", len(body), body[max(0, len(body)-20):])
	}
}

// bigServer streams size bytes of metric lines from one shared block.
func bigServer(t testing.TB, size int) string {
	t.Helper()
	block := bytes.Repeat([]byte("envoy_cluster_upstream_rq{cluster_name=\"outbound|80||svc.ns.svc.cluster.local\"} 42\n"), 800)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for left := size; left > 0 && r.Context().Err() == nil; left -= len(block) {
			if _, err := w.Write(block[:min(left, len(block))]); err != nil {
				return
			}
		}
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// TestFiftyMegabyteBodiesStayBounded merges a 50 MB Envoy body and a 50 MB app body and
// checks the process allocated far less than one body while doing it: nothing is buffered.
func TestFiftyMegabyteBodiesStayBounded(t *testing.T) {
	const size = 50 << 20
	reg, wrapped := agentRegistry(t)
	m, err := New(Config{Agent: reg, EnvoyURL: bigServer(t, size), AppURLs: []string{bigServer(t, size)}, MaxBytes: 64 << 20, Registerer: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(m)
	defer front.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL, nil)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2*size-1<<20 {
		t.Fatalf("merged %d bytes, want about %d", n, 2*size)
	}
	// Every allocation in the process (servers, client, merger) during the scrape: buffering
	// even one body would be 50 MB; streaming costs a few buffers.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("merged %d MB; allocated %d KB in the whole process", n>>20, alloc>>10)
	if alloc > 8<<20 {
		t.Errorf("allocated %d bytes while merging %d: the merge is buffering", alloc, n)
	}
	if counterValue(t, reg, "istio_agent_scrape_failures_total", FailApp)+counterValue(t, reg, "istio_agent_scrape_failures_total", FailEnvoy) != 0 {
		t.Error("a target failed")
	}
}

func BenchmarkMergedScrape1MB(b *testing.B) {
	reg, wrapped := agentRegistry(b)
	half := 512 << 10
	m, err := New(Config{Agent: reg, EnvoyURL: bigServer(b, half), AppURLs: []string{bigServer(b, half)}, Registerer: wrapped})
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(m)
	defer front.Close()
	client := front.Client()
	b.SetBytes(int64(2 * half))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(front.URL)
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := io.Copy(io.Discard, resp.Body); n < int64(2*half) {
			b.Fatal(fmt.Sprintf("short scrape: %d", n))
		}
		resp.Body.Close()
	}
}

func TestSecondMergerSharesCounters(t *testing.T) {
	reg, wrapped := agentRegistry(t)
	a, err := New(Config{Registerer: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Registerer: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	scrape(t, a, nil, "")
	scrape(t, b, nil, "")
	if n := counterValue(t, reg, "istio_agent_scrapes_total", ""); n != 2 {
		t.Errorf("scrapes_total = %v, want 2 across both mergers", n)
	}
}
