package status

import (
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/internal/istiolog"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/internal/syncbuf"
)

type flag struct{ v atomic.Bool }

func (f *flag) Ready() bool { return f.v.Load() }

func TestReadinessTransitions(t *testing.T) {
	admin := newFakeAdmin(t)
	reg, wrapped := NewAgentRegistry()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start.Add(2500 * time.Millisecond)
	dns := &flag{}
	var bootstrapErr atomic.Value
	bootstrapErr.Store(errors.New("no such file"))
	s, err := New(Config{
		AdminPort: admin.port, DNSEnabled: true, DNS: dns,
		GRPCBootstrapPath: "etc/istio/proxy/grpc-bootstrap.json",
		CheckGRPCBootstrap: func(path string) error {
			if e, _ := bootstrapErr.Load().(error); e != nil && e.Error() != "" {
				return e
			}
			return nil
		},
		Gatherer: reg, Registerer: wrapped, ProcessStart: start, Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	base, stop := serve(t, s)
	ready := func() (int, string) { return get(t, http.MethodGet, base+"/healthz/ready") }

	steps := []struct {
		name                                string
		cdsOK, cdsRej, ldsOK, ldsRej, st, w int
		want                                string
	}{
		{"nothing yet", -1, -1, -1, -1, 2, -1, "config not received from XDS server (is Istiod running?): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected"},
		// Istio's order: nothing accepted yet is "not received" even with rejections.
		{"rejected, none accepted", 0, 2, 0, 0, 3, 0, "config not received from XDS server (is Istiod running?): cds updates: 0 successful, 2 rejected"},
		{"rejected", 1, 0, 0, 2, 3, 0, "config received from XDS server, but was rejected: cds updates: 1 successful, 0 rejected; lds updates: 0 successful, 2 rejected"},
		{"partial", 1, 0, 0, 0, 3, 0, "config not fully received from XDS server: cds updates: 1 successful"},
		{"initializing", 1, 0, 1, 0, 3, 0, "server is not live, current state is: INITIALIZING"},
		{"no state", 1, 0, 1, 0, -1, 0, "failed to get readiness stats: server.state is not yet updated: listener_manager.workers_started: 0\n"},
		{"no workers", 1, 0, 1, 0, 0, 0, "workers have not yet started"},
		{"bootstrap", 1, 0, 1, 0, 0, 1, "grpc bootstrap etc/istio/proxy/grpc-bootstrap.json: no such file"},
	}
	for _, st := range steps {
		admin.set(st.cdsOK, st.cdsRej, st.ldsOK, st.ldsRej, st.st, st.w)
		code, body := ready()
		if code != 503 || !strings.Contains(body, st.want) {
			t.Errorf("%s: got %d %q, want 503 containing %q", st.name, code, body, st.want)
		}
	}
	if q, _ := admin.badQuery.Load().(string); q != "" {
		t.Errorf("admin got an unexpected query: %s", q)
	}
	bootstrapErr.Store(errors.New(""))
	if code, body := ready(); code != 503 || !strings.Contains(body, "DNS lookup table") {
		t.Errorf("DNS gate: %d %q", code, body)
	}
	dns.v.Store(true)
	if code, body := ready(); code != 200 {
		t.Fatalf("all conditions met: %d %q", code, body)
	}
	if v := gaugeValue(t, reg, "istio_agent_startup_duration_seconds"); v != 2.5 {
		t.Errorf("startup_duration_seconds = %v, want 2.5", v)
	}

	// Envoy's conditions are latched: a later DRAINING state or a dead admin port is not looked at.
	admin.set(1, 0, 1, 0, 1, 1)
	before := admin.requests.Load()
	if code, _ := ready(); code != 200 || admin.requests.Load() != before {
		t.Errorf("after the latch: %d, %d admin requests (want 200 and none)", code, admin.requests.Load()-before)
	}
	// The DNS and bootstrap conditions are not latched.
	dns.v.Store(false)
	if code, _ := ready(); code != 503 {
		t.Errorf("DNS table lost: %d, want 503", code)
	}
	dns.v.Store(true)

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckReady(t.Context()); err == nil || err.Error() != "server is terminated" {
		t.Errorf("after shutdown: %v, want server is terminated", err)
	}
}

func TestReadinessAdminDown(t *testing.T) {
	admin := newFakeAdmin(t)
	port := admin.port
	admin.srv.Close()
	s, err := New(Config{AdminPort: port, ReadinessTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Istio's reason is the HTTP client's error, unwrapped (pkg/http/get.go at 1.30.3).
	if err := s.CheckReady(t.Context()); err == nil || !strings.HasPrefix(err.Error(), `Get "http://127.0.0.1:`) || !strings.Contains(err.Error(), ": dial tcp 127.0.0.1:") {
		t.Errorf("admin down: %v", err)
	}
}

func TestReadinessNoEnvoy(t *testing.T) {
	s, err := New(Config{NoEnvoy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckReady(t.Context()); err != nil {
		t.Errorf("without Envoy and nothing else to wait for: %v", err)
	}
}

func TestParseEnvoyStats(t *testing.T) {
	var st envoyStats
	err := parseEnvoyStats([]byte("server.state: 3\nlistener_manager.workers_started: 1\ncluster_manager.cds.update_success: 12\nother.stat: x\nnoise"), &st)
	if err != nil || st.state != 3 || !st.stateFound || st.workersStarted != 1 || st.cdsSuccess != 12 || st.ldsSuccess != 0 {
		t.Errorf("parsed %+v, %v", st, err)
	}
	if err := parseEnvoyStats([]byte("server.state: -1\n"), &st); err == nil {
		t.Error("negative state accepted")
	}
	if err := parseEnvoyStats([]byte("cluster_manager.cds.update_success: 99999999999999999999999\n"), &st); err == nil {
		t.Error("overflowing value accepted")
	}
}

// The parse allocates nothing, and neither does a latched readiness check: kubelet and Envoy's
// 15021 listener poll it every few seconds for the life of the pod.
func TestReadinessAllocs(t *testing.T) {
	body := []byte("cluster_manager.cds.update_rejected: 0\ncluster_manager.cds.update_success: 4\n" +
		"listener_manager.lds.update_rejected: 0\nlistener_manager.lds.update_success: 4\n" +
		"listener_manager.workers_started: 1\nserver.state: 0\n")
	var st envoyStats
	if a := testing.AllocsPerRun(100, func() { _ = parseEnvoyStats(body, &st) }); a != 0 {
		t.Errorf("parseEnvoyStats: %v allocs, want 0", a)
	}
	s, err := New(Config{AdminPort: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.ready.configOK.Store(true)
	s.ready.liveOK.Store(true)
	ctx := t.Context()
	if a := testing.AllocsPerRun(100, func() { _ = s.CheckReady(ctx) }); a != 0 {
		t.Errorf("latched CheckReady: %v allocs, want 0", a)
	}
}

func FuzzParseEnvoyStats(f *testing.F) {
	f.Add([]byte("server.state: 0\nlistener_manager.workers_started: 1\n"))
	f.Add([]byte("cluster_manager.cds.update_success:7"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var st envoyStats
		_ = parseEnvoyStats(body, &st)
	})
}

func gaugeValue(t testing.TB, r *metric.Registry, name string) float64 {
	t.Helper()
	v, ok := r.Value(name)
	if !ok {
		t.Fatalf("%s not found", name)
	}
	return v
}

func BenchmarkReadiness(b *testing.B) {
	b.Run("latched", func(b *testing.B) {
		s, err := New(Config{NoEnvoy: true})
		if err != nil {
			b.Fatal(err)
		}
		base, _ := serve(b, s)
		benchGet(b, base+"/healthz/ready")
	})
	b.Run("envoy_admin", func(b *testing.B) {
		// Not ready yet: every check asks the admin stand-in, as during start-up.
		admin := newFakeAdmin(b)
		admin.set(1, 0, 1, 0, 3, 0)
		s, err := New(Config{AdminPort: admin.port})
		if err != nil {
			b.Fatal(err)
		}
		base, _ := serve(b, s)
		benchGet(b, base+"/healthz/ready")
	})
}

func benchGet(b *testing.B, u string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	client.CloseIdleConnections()
}

// TestReadinessOnIPv6Loopback: with INSTANCE_IP=fd00::10 in a dual-stack pod, Envoy's admin
// listens on [::1] only; Istio's agent probes it there (AdminLocalhost) and becomes ready. Real
// sockets: the stand-in admin listens on [::1] alone, so probing 127.0.0.1 (Wingman's old choice)
// fails.
func TestReadinessOnIPv6Loopback(t *testing.T) {
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		ln.Close()
	}
	admin := newFakeAdminOn(t, "[::1]:0")
	admin.set(1, 0, 1, 0, 0, 1)
	probe := func(host string) error {
		s, err := New(Config{LocalHost: host, AdminPort: admin.port, ReadinessTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s.CheckReady(t.Context())
	}
	if err := probe(AdminLocalhost(false, "fd00::10")); err != nil {
		t.Errorf("probing %s: %v", AdminLocalhost(false, "fd00::10"), err)
	}
	if err := probe("127.0.0.1"); err == nil {
		t.Error("the stand-in also answers on 127.0.0.1: the test cannot tell the hosts apart")
	}
}

// TestAdminLocalhost: Istio's choice (pilot/cmd/pilot-agent/status/server.go NewServer at 1.30.3).
func TestAdminLocalhost(t *testing.T) {
	for _, tc := range []struct {
		ipv6Only bool
		ip, want string
	}{
		{false, "10.0.0.5", "127.0.0.1"},
		{false, "fd00::10", "::1"},
		{false, "::ffff:10.0.0.5", "127.0.0.1"}, // To4() is not nil
		{false, "fe80::1", "127.0.0.1"},         // link-local unicast
		{false, "", "127.0.0.1"},
		{false, "not-an-ip", "127.0.0.1"},
		{true, "", "::1"},
		{true, "10.0.0.5", "::1"},
	} {
		if got := AdminLocalhost(tc.ipv6Only, tc.ip); got != tc.want {
			t.Errorf("ipv6Only %v, INSTANCE_IP %q: %s, want %s", tc.ipv6Only, tc.ip, got, tc.want)
		}
	}
}

// TestReadinessLogsAsIstio: every failed /healthz/ready is logged as a warning "Envoy proxy is
// NOT ready: <reason>" in the default scope, and "Envoy proxy is ready" once per recovery
// (pilot/cmd/pilot-agent/status/server.go handleReadyProbe at 1.30.3).
func TestReadinessLogsAsIstio(t *testing.T) {
	admin := newFakeAdmin(t)
	var out syncbuf.Buffer
	logs, err := istiolog.New(istiolog.Options{}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	s, err := New(Config{AdminPort: admin.port, Logger: logs.Logger(istiolog.DefaultScope)})
	if err != nil {
		t.Fatal(err)
	}
	base, stop := serve(t, s)
	defer stop()
	ready := func() int { code, _ := get(t, http.MethodGet, base+"/healthz/ready"); return code }
	admin.set(0, 0, 0, 0, 2, -1)
	ready()
	ready()
	admin.set(1, 0, 1, 0, 0, 1)
	ready()
	ready()
	notReady := "\twarn\tEnvoy proxy is NOT ready: config not received from XDS server (is Istiod running?): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected\n"
	var got []string
	for line := range strings.Lines(out.String()) {
		if _, rest, _ := strings.Cut(line, "\t"); strings.Contains(rest, "Envoy proxy") {
			got = append(got, "\t"+rest)
		}
	}
	want := []string{notReady, notReady, "\tinfo\tEnvoy proxy is ready\n"}
	if !slices.Equal(got, want) {
		t.Errorf("logged\n%q\nwant\n%q", got, want)
	}
}
