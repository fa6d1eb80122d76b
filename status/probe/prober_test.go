package probe

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// probeApp builds a Prober from doc and returns a function that runs path through it the way
// the status server does, returning status code and body.
func probeApp(t *testing.T, doc string, cfg Config) func(path string, hdr http.Header) (int, string) {
	t.Helper()
	actions, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Actions = actions
	if cfg.TargetHost == "" {
		cfg.TargetHost = "127.0.0.1"
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return func(path string, hdr http.Header) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, front.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		if h := hdr.Get("Host"); h != "" {
			req.Host = h
		}
		resp, err := front.Client().Do(req)
		if err != nil {
			t.Fatalf("probe %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

func portOf(t *testing.T, rawURL string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func TestHTTPProbe(t *testing.T) {
	type seen struct {
		remote, host, ua, custom, fromConfig string
	}
	got := make(chan seen, 16)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			got <- seen{host, r.Host, r.UserAgent(), r.Header.Get("X-Custom"), r.Header.Get("X-Config")}
			fmt.Fprint(w, "fine")
		case "/fail":
			http.Error(w, "sick", http.StatusServiceUnavailable)
		case "/big":
			w.Write([]byte(strings.Repeat("x", 64<<10)))
		case "/hop":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "http://elsewhere.invalid/x", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		}
	}))
	defer app.Close()
	port := portOf(t, app.URL)
	doc := fmt.Sprintf(`{
	 "/app-health/web/livez": {"httpGet": {"path": "/ok", "port": %[1]d, "httpHeaders": [{"name": "X-Config", "value": "c"}]}},
	 "/app-health/web/readyz": {"httpGet": {"path": "/fail", "port": %[1]d}},
	 "/app-health/web/startupz": {"httpGet": {"path": "/big", "port": %[1]d}},
	 "/app-health/hop/livez": {"httpGet": {"path": "/hop", "port": %[1]d}},
	 "/app-health/away/livez": {"httpGet": {"path": "/away", "port": %[1]d}},
	 "/app-health/loop/livez": {"httpGet": {"path": "/loop", "port": %[1]d}},
	 "/app-lifecycle/web/prestopz": {"httpGet": {"path": "/ok", "port": %[1]d}}
	}`, port)
	run := probeApp(t, doc, Config{StatusPort: 15020})

	code, body := run("/app-health/web/livez", http.Header{"User-Agent": {"kube-probe/1.30"}, "X-Custom": {"k"}, "Host": {"pod.local:15020"}})
	if code != 200 || body != "fine" {
		t.Fatalf("livez = %d %q", code, body)
	}
	s := <-got
	if s.ua != "kube-probe/1.30" || s.custom != "k" || s.fromConfig != "c" {
		t.Errorf("headers not forwarded: %+v", s)
	}
	if want := net.JoinHostPort("pod.local", strconv.Itoa(port)); s.host != want {
		t.Errorf("Host = %q, want the status port rewritten: %q", s.host, want)
	}
	// On Linux every 127/8 address is local, so the probe comes from Istio's 127.0.0.6.
	if s.remote != "127.0.0.6" {
		t.Errorf("probe source = %s, want 127.0.0.6", s.remote)
	}
	if code, body := run("/app-health/web/readyz", nil); code != 503 || !strings.Contains(body, "sick") {
		t.Errorf("readyz = %d %q, want the app's 503 relayed", code, body)
	}
	if code, body := run("/app-health/web/startupz", nil); code != 200 || len(body) != maxProbeBody {
		t.Errorf("startupz = %d, %d body bytes; want 200 and the body cut at %d", code, len(body), maxProbeBody)
	}
	if code, _ := run("/app-health/hop/livez", nil); code != 200 {
		t.Errorf("same-host redirect = %d, want it followed to 200", code)
	}
	<-got
	if code, _ := run("/app-health/away/livez", nil); code != 200 {
		t.Errorf("redirect to another host = %d, want success", code)
	}
	if code, body := run("/app-health/loop/livez", nil); code != 500 || !strings.Contains(body, "10 redirects") {
		t.Errorf("redirect loop = %d %q, want a failure after 10", code, body)
	}
	if code, _ := run("/app-lifecycle/web/prestopz", nil); code != 200 {
		t.Errorf("prestopz = %d", code)
	}
	<-got
	if code, _ := run("/app-health/nobody/livez", nil); code != 400 {
		t.Errorf("unknown probe path = %d, want 400", code)
	}
}

func TestHTTPSProbeUsesHTTP2(t *testing.T) {
	protos := make(chan string, 1)
	app := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.Proto
	}))
	app.EnableHTTP2 = true
	app.StartTLS()
	defer app.Close()
	doc := fmt.Sprintf(`{"/app-health/tls/readyz": {"httpGet": {"path": "/", "port": %d, "scheme": "HTTPS"}}}`, portOf(t, app.URL))
	run := probeApp(t, doc, Config{})
	if code, body := run("/app-health/tls/readyz", nil); code != 200 {
		t.Fatalf("https probe = %d %q", code, body)
	}
	if p := <-protos; p != "HTTP/2.0" {
		t.Errorf("https probe used %s, want HTTP/2.0", p)
	}
	run = probeApp(t, doc, Config{DisableHTTP2: true})
	run("/app-health/tls/readyz", nil)
	if p := <-protos; p != "HTTP/1.1" {
		t.Errorf("with HTTP/2 probing disabled got %s", p)
	}
}

func TestHangingTargetTimesOut(t *testing.T) {
	release := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer app.Close()
	defer close(release)
	doc := fmt.Sprintf(`{"/app-health/slow/livez": {"httpGet": {"path": "/", "port": %d}, "timeoutSeconds": 1}}`, portOf(t, app.URL))
	run := probeApp(t, doc, Config{})
	start := time.Now()
	code, _ := run("/app-health/slow/livez", nil)
	if code != 500 {
		t.Errorf("hanging target = %d, want 500", code)
	}
	// A bound on a wait that must end, not a measure: 20 s is far below the 30 s a missing
	// timeoutSeconds would mean, and far above what a loaded machine adds to 1 s.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("hanging probe took %v, want about the 1 s timeout", d)
	}
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Addr, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		accepted <- c.RemoteAddr()
		c.Close()
	}()
	open := ln.Addr().(*net.TCPAddr).Port
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	doc := fmt.Sprintf(`{"/app-health/db/livez": {"tcpSocket": {"port": %d}}, "/app-health/db/readyz": {"tcpSocket": {"port": %d}}}`, open, closedPort)
	run := probeApp(t, doc, Config{})
	if code, _ := run("/app-health/db/livez", nil); code != 200 {
		t.Errorf("open port = %d", code)
	}
	if a := <-accepted; a.(*net.TCPAddr).IP.String() != "127.0.0.6" {
		t.Errorf("tcp probe source = %v, want 127.0.0.6", a)
	}
	if code, _ := run("/app-health/db/readyz", nil); code != 500 {
		t.Errorf("closed port = %d, want 500", code)
	}
	ln.Close()
	<-done
}

func TestGRPCProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// What the application saw of each call: kubelet's user-agent, the probe's source address.
	seen := make(chan [2]string, 10)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		pr, _ := peer.FromContext(ctx)
		select {
		case seen <- [2]string{strings.Join(md.Get("user-agent"), ","), pr.Addr.(*net.TCPAddr).IP.String()}:
		default:
		}
		return h(ctx, req)
	}))
	hs := health.NewServer()
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() { srv.Stop(); <-served }()
	port := ln.Addr().(*net.TCPAddr).Port
	doc := fmt.Sprintf(`{
	 "/app-health/rpc/livez": {"grpc": {"port": %[1]d, "service": "up"}},
	 "/app-health/rpc/readyz": {"grpc": {"port": %[1]d, "service": "down"}},
	 "/app-health/rpc/startupz": {"grpc": {"port": %[1]d, "service": "unknown"}},
	 "/app-health/all/livez": {"grpc": {"port": %[1]d}}
	}`, port)
	run := probeApp(t, doc, Config{})
	for path, want := range map[string]struct {
		code int
		body string
	}{
		"/app-health/rpc/livez":    {200, ""},
		"/app-health/rpc/readyz":   {500, "service status NOT_SERVING"},
		"/app-health/rpc/startupz": {500, "code = NotFound desc = unknown service"},
		"/app-health/all/livez":    {200, ""},
	} {
		code, body := run(path, http.Header{"User-Agent": {"kube-probe/1.30"}})
		if code != want.code || !strings.Contains(body, want.body) {
			t.Errorf("%s = %d %q, want %d %q", path, code, body, want.code, want.body)
		}
		if got := <-seen; got != [2]string{"kube-probe/1.30", "127.0.0.6"} {
			t.Errorf("%s: the application saw user-agent %q from %s", path, got[0], got[1])
		}
	}
}

// TestGRPCProbeTimeout: an application that accepts the connection and never answers fails the
// probe once its timeout has passed.
func TestGRPCProbeTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	defer func() {
		ln.Close()
		if c, ok := <-accepted; ok {
			c.Close()
		}
	}()
	run := probeApp(t, fmt.Sprintf(`{"/app-health/rpc/livez": {"grpc": {"port": %d}, "timeoutSeconds": 1}}`, ln.Addr().(*net.TCPAddr).Port), Config{})
	if code, body := run("/app-health/rpc/livez", nil); code != 500 || !strings.Contains(body, "DeadlineExceeded") {
		t.Fatalf("silent application: %d %q, want 500 DeadlineExceeded", code, body)
	}
}

// TestSourceFallback dials an IPv6 loopback target: ::6 is not configured, so binding it fails
// and the dialer must fall back to the kernel's source.
func TestSourceFallback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := dialer{}.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial with fallback: %v", err)
	}
	if ip := c.LocalAddr().(*net.TCPAddr).IP; ip.Equal(net.ParseIP("::6")) {
		t.Errorf("unexpectedly bound ::6")
	}
	c.Close()
	// A refused connection is not retried from another source: it is the probe's answer.
	refused := ln.Addr().(*net.TCPAddr)
	ln.Close()
	if _, err := (dialer{}).DialContext(ctx, "tcp", refused.String()); err == nil {
		t.Error("dial to a closed port succeeded")
	}
}
