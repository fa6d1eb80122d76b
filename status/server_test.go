package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeLifecycle records calls; quit cancels the server's context, as the supervisor's does.
type fakeLifecycle struct {
	drained  chan struct{}
	drainErr error
	quit     chan struct{}
	onQuit   func()
}

func (l *fakeLifecycle) Drain(ctx context.Context) error {
	l.drained <- struct{}{}
	return l.drainErr
}

func (l *fakeLifecycle) Quit() {
	l.quit <- struct{}{}
	if l.onQuit != nil {
		l.onQuit()
	}
}

func newLifecycle() *fakeLifecycle {
	return &fakeLifecycle{drained: make(chan struct{}, 4), quit: make(chan struct{}, 4)}
}

func TestIsLocal(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5": true, "127.0.0.6:5": true, "[::1]:5": true, "[::ffff:127.0.0.1]:5": true,
		"192.0.2.2:5": false, "[fd00::2]:5": false, "10.0.0.1:80": false, "garbage": false, "": false,
	} {
		if got := isLocal(addr); got != want {
			t.Errorf("isLocal(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestQuitQuitQuit(t *testing.T) {
	lc := newLifecycle()
	s, err := New(Config{NoEnvoy: true, Lifecycle: lc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	lc.onQuit = cancel
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()

	if code, _ := get(t, http.MethodGet, base+"/quitquitquit"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /quitquitquit = %d, want 405", code)
	}
	if code, body := get(t, http.MethodPost, base+"/quitquitquit"); code != 200 || body != "OK" {
		t.Errorf("POST /quitquitquit = %d %q", code, body)
	}
	<-lc.quit
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after quit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop after /quitquitquit")
	}
}

// TestLocalOnlyEndpointsRefuseRemoteCallers runs the real server on a listener whose peers
// look non-local: quit, drain, pprof, ndsz and (when configured) metrics refuse them.
func TestLocalOnlyEndpointsRefuseRemoteCallers(t *testing.T) {
	lc := newLifecycle()
	cfg := Config{NoEnvoy: true, Lifecycle: lc, Profiling: true, MetricsLocalhostOnly: true,
		NDSZ: func() ([]byte, error) { return []byte(`{"table":{}}`), nil }}
	remote, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	local, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	remoteBase, _ := serveOn(t, remote, remoteListener{ln, &net.TCPAddr{IP: net.ParseIP("192.0.2.50"), Port: 40000}})
	localBase, _ := serve(t, local)

	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/quitquitquit"}, {http.MethodPost, "/drain"}, {http.MethodGet, "/debug/pprof/"},
		{http.MethodGet, "/debug/pprof/cmdline"}, {http.MethodGet, "/debug/ndsz"}, {http.MethodGet, "/stats/prometheus"},
	} {
		if code, _ := get(t, c.method, remoteBase+c.path); code != http.StatusForbidden {
			t.Errorf("remote %s %s = %d, want 403", c.method, c.path, code)
		}
		if c.path == "/quitquitquit" {
			continue // a local quit is TestQuitQuitQuit's
		}
		if code, body := get(t, c.method, localBase+c.path); code != 200 {
			t.Errorf("local %s %s = %d %q, want 200", c.method, c.path, code, body)
		}
	}
	select {
	case <-lc.quit:
		t.Error("a remote /quitquitquit reached the lifecycle")
	default:
	}
	if len(lc.drained) != 1 {
		t.Errorf("drain called %d times, want once (the local call)", len(lc.drained))
	}
	// Readiness and app probes stay open to everyone: kubelet is not local.
	if code, _ := get(t, http.MethodGet, remoteBase+"/healthz/ready"); code != 200 {
		t.Errorf("remote readiness = %d", code)
	}
}

func TestPprofOffByDefault(t *testing.T) {
	s, err := New(Config{NoEnvoy: true})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serve(t, s)
	if code, _ := get(t, http.MethodGet, base+"/debug/pprof/"); code != 404 {
		t.Errorf("pprof without profiling = %d, want 404", code)
	}
	if code, body := get(t, http.MethodGet, base+"/debug/ndsz"); code != 404 || body != "{}" {
		t.Errorf("ndsz without a table = %d %q", code, body)
	}
	if code, _ := get(t, http.MethodPost, base+"/drain"); code != 503 {
		t.Errorf("drain without a lifecycle = %d", code)
	}
}

func TestDrainFailure(t *testing.T) {
	lc := newLifecycle()
	lc.drainErr = errors.New("admin refused")
	s, err := New(Config{NoEnvoy: true, Lifecycle: lc})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serve(t, s)
	if code, body := get(t, http.MethodPost, base+"/drain"); code != 500 || !strings.Contains(body, "admin refused") {
		t.Errorf("failed drain = %d %q", code, body)
	}
	if code, _ := get(t, http.MethodGet, base+"/drain"); code != 405 {
		t.Errorf("GET /drain = %d", code)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{AppProbers: `{"/app-health/payments/livez": {"httpGet": {"port": "web"}}}`}, `ISTIO_KUBE_APP_PROBERS: app probers: container "payments"`},
		{Config{AppProbers: `{"/app-health/payments/livez": `}, "ISTIO_KUBE_APP_PROBERS: app probers: invalid JSON"},
		{Config{Port: 15020, PrometheusAnnotations: `{"port":"15020"}`}, "ISTIO_PROMETHEUS_ANNOTATIONS"},
		{Config{DNSEnabled: true}, "DNS ReadyChecker"},
		{Config{GRPCBootstrapPath: "x"}, "CheckGRPCBootstrap"},
		{Config{Port: 70000}, "port"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
	// A gateway ignores the annotations, as in Istio.
	if _, err := New(Config{Port: 15020, NodeType: "router", PrometheusAnnotations: `{"port":"15020"}`}); err != nil {
		t.Errorf("router with annotations: %v", err)
	}
}

func TestAppProbeThroughServer(t *testing.T) {
	release := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		io.WriteString(w, "app ok")
	}))
	defer app.Close()
	defer close(release)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(app.URL, "http://"))
	s, err := New(Config{NoEnvoy: true, ProbeTargetHost: "127.0.0.1", AppProbers: fmt.Sprintf(
		`{"/app-health/web/readyz": {"httpGet": {"path": "/", "port": %[1]s}},
		  "/app-health/web/livez": {"httpGet": {"path": "/hang", "port": %[1]s}, "timeoutSeconds": 30}}`, port)})
	if err != nil {
		t.Fatal(err)
	}
	base, stop := serve(t, s)
	if code, body := get(t, http.MethodGet, base+"/app-health/web/readyz"); code != 200 || body != "app ok" {
		t.Errorf("readyz = %d %q", code, body)
	}
	if code, _ := get(t, http.MethodGet, base+"/app-health/other/readyz"); code != 400 {
		t.Errorf("unknown probe = %d, want 400", code)
	}
	// A probe stuck on a hanging app (30 s timeout) must not hold shutdown.
	result := make(chan error, 1)
	go func() {
		resp, err := http.Get(base + "/app-health/web/livez")
		if err == nil {
			resp.Body.Close()
		}
		result <- err
	}()
	waitFor(t, func() bool { return s.track.running() > 0 })
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Below the probe's 30 s timeout, and far above what a loaded machine adds to a shutdown.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("shutdown with a hanging probe took %v, want it not to wait for the probe's 30 s timeout", d)
	}
	<-result
}

func TestRunBindsAndStops(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	s, err := New(Config{NoEnvoy: true, ListenHost: "127.0.0.1", Port: busy.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Run on a busy port = %v, want a listen error", err)
	}
	off, err := New(Config{NoEnvoy: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := off.Run(ctx); err != nil {
		t.Errorf("disabled server: %v", err)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	envoy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "envoy_server_live 1\n")
	}))
	defer envoy.Close()
	_, eport, _ := net.SplitHostPort(strings.TrimPrefix(envoy.URL, "http://"))
	var port int
	fmt.Sscan(eport, &port)
	reg, wrapped := NewAgentRegistry()
	s, err := New(Config{EnvoyPrometheusPort: port, AdminPort: 1, Gatherer: reg, Registerer: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serve(t, s)
	for _, path := range []string{"/stats/prometheus", "/metrics"} {
		code, body := get(t, http.MethodGet, base+path)
		for _, want := range []string{"istio_agent_go_goroutines", "istio_agent_process_cpu_seconds_total", "istio_agent_scrapes_total", "envoy_server_live 1"} {
			if code != 200 || !strings.Contains(body, want) {
				t.Errorf("%s: %d, missing %s", path, code, want)
			}
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not met in 10 s")
		case <-tick.C:
		}
	}
}
