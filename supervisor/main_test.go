package supervisor

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/wingman-mesh/wingman/internal/clock/clocktest"
)

// standinPath is the stand-in Envoy built by TestMain.
var standinPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "supervisor-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	standinPath = filepath.Join(dir, "envoy")
	out, err := exec.Command("go", "build", "-o", standinPath, "../lab/envoyproc").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building stand-in envoy: %v\n%s", err, out)
		os.Exit(1)
	}
	// Orphans of the stand-in are re-parented to this process, as they would be to PID 1.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

// events collects the stand-in's notifications.
type events struct {
	url     string
	ch      chan string
	backlog []string // events read while waiting for another; owned by the test goroutine
}

func newEvents(t *testing.T) *events {
	t.Helper()
	e := &events{ch: make(chan string, 256)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.ch <- string(b)
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// wait returns the next event starting with prefix; others are kept for later waits.
func (e *events) wait(t *testing.T, prefix string) string {
	t.Helper()
	// Events can arrive in any order (an orphaned grandchild may report before its parent):
	// the ones skipped here are kept for later waits.
	for k, ev := range e.backlog {
		if strings.HasPrefix(ev, prefix) {
			e.backlog = append(e.backlog[:k], e.backlog[k+1:]...)
			return ev
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-e.ch:
			if strings.HasPrefix(ev, prefix) {
				return ev
			}
			e.backlog = append(e.backlog, ev)
		case <-ctx.Done():
			t.Fatalf("no %q event from the stand-in envoy", prefix)
		}
	}
}

// none fails if an event starting with prefix is already queued.
func (e *events) none(t *testing.T, prefix string) {
	t.Helper()
	for _, ev := range e.backlog {
		if strings.HasPrefix(ev, prefix) {
			t.Fatalf("unexpected event %q", ev)
		}
	}
	for {
		select {
		case ev := <-e.ch:
			if strings.HasPrefix(ev, prefix) {
				t.Fatalf("unexpected event %q", ev)
			}
		default:
			return
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func newFakeClock() *clocktest.Fake { return clocktest.NewFake(time.Unix(1e9, 0)) }
