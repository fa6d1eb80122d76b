package status

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeAdmin is an Envoy admin stand-in serving /stats with settable values.
type fakeAdmin struct {
	srv      *http.Server
	port     int
	requests atomic.Int64
	mu       sync.Mutex
	lines    string // guarded by mu: the /stats answer
	badQuery atomic.Value
}

func newFakeAdmin(t testing.TB) *fakeAdmin {
	t.Helper()
	return newFakeAdminOn(t, "127.0.0.1:0")
}

// newFakeAdminOn is an Envoy admin stand-in listening only on addr.
func newFakeAdminOn(t testing.TB, addr string) *fakeAdmin {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	a := &fakeAdmin{port: ln.Addr().(*net.TCPAddr).Port}
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.requests.Add(1)
		q := r.URL.Query()
		if r.URL.Path != "/stats" || !q.Has("usedonly") || q.Get("filter") != readyStatsFilter {
			a.badQuery.Store(r.URL.String())
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		io.WriteString(w, a.lines)
	})}
	done := make(chan struct{})
	go func() { defer close(done); a.srv.Serve(ln) }()
	t.Cleanup(func() { a.srv.Close(); <-done })
	return a
}

// set publishes stats; a negative value leaves that stat out (Envoy lists only used stats).
func (a *fakeAdmin) set(cdsOK, cdsRej, ldsOK, ldsRej, state, workers int) {
	var b strings.Builder
	for _, s := range []struct {
		name string
		v    int
	}{
		{"cluster_manager.cds.update_rejected", cdsRej}, {"cluster_manager.cds.update_success", cdsOK},
		{"listener_manager.lds.update_rejected", ldsRej}, {"listener_manager.lds.update_success", ldsOK},
		{"listener_manager.workers_started", workers}, {"server.state", state},
	} {
		if s.v >= 0 {
			fmt.Fprintf(&b, "%s: %d\n", s.name, s.v)
		}
	}
	a.mu.Lock()
	a.lines = b.String()
	a.mu.Unlock()
}

// serve runs s on a loopback listener until the test ends; it returns the base URL and a
// cancel that stops the server and waits for Serve to return.
func serve(t testing.TB, s *Server) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, s, ln)
}

func serveOn(t testing.TB, s *Server, ln net.Listener) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				err = fmt.Errorf("Serve did not return 10 s after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return "http://" + ln.Addr().String(), stop
}

func get(t testing.TB, method, rawURL string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// remoteListener makes every accepted connection report peer as its remote address: the real
// server then sees a non-local caller. (The machine's own non-loopback address is on the
// workplace network, where test traffic is not allowed, so the peer is relabelled instead.)
type remoteListener struct {
	net.Listener
	peer net.Addr
}

func (l remoteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerConn{c, l.peer}, nil
}

type peerConn struct {
	net.Conn
	peer net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.peer }
