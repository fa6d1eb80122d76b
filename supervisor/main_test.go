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
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/wingman-mesh/wingman/internal/clock"
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
	out, err := exec.Command("go", "build", "-o", standinPath, "./internal/standin").CombinedOutput()
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

// fakeClock is a Clock whose timers fire only when the test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]bool
	changed chan struct{} // closed and replaced whenever the set of timers changes
}

type fakeTimer struct {
	c    *fakeClock
	when time.Time
	ch   chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1e9, 0), timers: map[*fakeTimer]bool{}, changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = true
	c.notifyLocked()
	return t
}

func (c *fakeClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	ok := t.c.timers[t]
	delete(t.c.timers, t)
	if ok {
		t.c.notifyLocked()
	}
	return ok
}

// Advance moves time on by d and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.when.After(c.now) {
			t.ch <- c.now
			delete(c.timers, t)
		}
	}
	c.notifyLocked()
}

// waitTimers blocks until exactly n timers are pending.
func (c *fakeClock) waitTimers(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		c.mu.Lock()
		got, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %d pending timers, have %d", n, got)
		}
	}
}

var _ clock.Clock = (*fakeClock)(nil)
