package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a prober that returns its results in order, then stays on the last one.
type script struct {
	mu      sync.Mutex
	results []error
	calls   int
}

func (s *script) Probe(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	r := s.results[0]
	if len(s.results) > 1 {
		s.results = s.results[1:]
	}
	return r
}

type report struct {
	healthy bool
	msg     string
}

func runChecker(t *testing.T, cfg Config, until func([]report) bool) []report {
	t.Helper()
	var mu sync.Mutex
	var got []report
	changed := make(chan struct{}, 100)
	cfg.Report = func(h bool, m string) {
		mu.Lock()
		got = append(got, report{h, m})
		mu.Unlock()
		changed <- struct{}{}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		ok := until(got)
		snapshot := append([]report(nil), got...)
		mu.Unlock()
		if ok {
			cancel()
			<-done
			return snapshot
		}
		select {
		case <-changed:
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("reports %v", snapshot)
		}
	}
}

// TestThresholds: Istio's rules: a report only when the threshold of consecutive results is
// reached and the state changes; a broken run resets the count.
func TestThresholds(t *testing.T) {
	boom := errors.New("boom")
	s := &script{results: []error{boom, nil, boom, boom, nil, nil, nil, boom, boom, boom, nil, nil}}
	got := runChecker(t, Config{Period: time.Millisecond, SuccessThreshold: 2, FailureThreshold: 2, App: s},
		func(r []report) bool { return len(r) == 3 })
	want := []report{{false, "boom"}, {true, ""}, {false, "boom"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reports %v, want %v", got, want)
	}
}

func TestEnvoyCheckedFirst(t *testing.T) {
	envoy := &script{results: []error{errors.New("envoy not ready"), nil}}
	app := &script{results: []error{nil}}
	got := runChecker(t, Config{Period: time.Millisecond, Envoy: envoy, App: app},
		func(r []report) bool { return len(r) == 2 })
	if got[0] != (report{false, "envoy not ready"}) || got[1] != (report{true, ""}) {
		t.Fatalf("reports %v", got)
	}
}

func TestHTTPProber(t *testing.T) {
	var mu sync.Mutex
	var seen *http.Request
	code := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Clone(context.Background())
		c := code
		mu.Unlock()
		w.WriteHeader(c)
	}))
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])
	p := NewHTTPProber(HTTPGet{Scheme: "HTTP", Port: port, Path: "/healthz?x=1",
		Headers:   []Header{{"Host", "app.example"}, {"X-Probe", "1"}},
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 6)}})
	ctx := context.Background()
	if err := p.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if seen.URL.Path != "/healthz" || seen.URL.RawQuery != "x=1" || seen.Host != "app.example" ||
		seen.Header.Get("X-Probe") != "1" || seen.UserAgent() != "istio-probe/1.0" || !strings.HasPrefix(seen.RemoteAddr, "127.0.0.6:") {
		t.Errorf("request %s %s host %q ua %q from %s", seen.URL.Path, seen.URL.RawQuery, seen.Host, seen.UserAgent(), seen.RemoteAddr)
	}
	code = http.StatusFound
	mu.Unlock()
	if err := p.Probe(ctx); err != nil {
		t.Errorf("302 is healthy for Istio ([200,400)): %v", err)
	}
	mu.Lock()
	code = http.StatusServiceUnavailable
	mu.Unlock()
	if err := p.Probe(ctx); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("503: %v", err)
	}
}

func TestHTTPSProberSkipsVerification(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])
	if err := NewHTTPProber(HTTPGet{Scheme: "https", Host: "127.0.0.1", Port: port}).Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestTCPProber(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	p := NewTCPProber("127.0.0.1", port)
	if err := p.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := p.Probe(context.Background()); err == nil {
		t.Fatal("closed port is healthy")
	}
}

func TestExecProber(t *testing.T) {
	if _, err := NewExecProber(nil); err == nil {
		t.Fatal("empty command accepted")
	}
	ok, _ := NewExecProber([]string{"true"})
	bad, _ := NewExecProber([]string{"false"})
	slow, _ := NewExecProber([]string{"sleep", "5"})
	if err := ok.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := bad.Probe(context.Background()); err == nil {
		t.Fatal("false is healthy")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := slow.Probe(ctx); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("slow command: %v", err)
	}
}

func TestGRPCProber(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := grpchealth.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	hs.SetServingStatus("app", healthpb.HealthCheckResponse_SERVING)
	p := NewGRPCProber(l.Addr().(*net.TCPAddr).Port, "app")
	if err := p.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs.SetServingStatus("app", healthpb.HealthCheckResponse_NOT_SERVING)
	if err := p.Probe(context.Background()); err == nil || err.Error() != `grpc health of "app" is NOT_SERVING` {
		t.Fatalf("NOT_SERVING: %v", err)
	}
	other := NewGRPCProber(l.Addr().(*net.TCPAddr).Port, "other")
	if err := other.Probe(context.Background()); status.Code(err) != codes.NotFound {
		t.Fatalf("a service the application does not know: %v, want its NotFound", err)
	}
	srv.Stop()
	if err := p.Probe(context.Background()); status.Code(err) != codes.Unavailable {
		t.Fatalf("application gone: %v, want Unavailable", err)
	}
}
