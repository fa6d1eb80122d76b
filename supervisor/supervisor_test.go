package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/internal/clock/clocktest"
)

type harness struct {
	ev    *events
	clock *clocktest.Fake
	dir   string
	cfg   Config
}

func newHarness(t *testing.T, env ...string) *harness {
	t.Helper()
	h := &harness{ev: newEvents(t), clock: newFakeClock(), dir: t.TempDir()}
	port := freePort(t)
	bootstrap := filepath.Join(h.dir, "envoy-rev.json")
	b := fmt.Sprintf(`{"admin":{"address":{"socket_address":{"address":"127.0.0.1","port_value":%d}}}}`, port)
	if err := os.WriteFile(bootstrap, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	h.cfg = Config{
		BinaryPath:            standinPath,
		BootstrapPath:         bootstrap,
		RemoveBootstrapOnExit: true,
		AdminPort:             port,
		Sidecar:               true,
		Env: append([]string{"STANDIN_NOTIFY=" + h.ev.url, "STANDIN_ARGS_FILE=" + filepath.Join(h.dir, "args.json")},
			env...),
		Stderr: os.Stderr,
		Clock:  h.clock,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	return h
}

// start runs the supervisor until the stand-in reports it is up.
func (h *harness) start(t *testing.T, ctx context.Context) (*Supervisor, <-chan error) {
	t.Helper()
	s, err := New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	h.ev.wait(t, "started")
	return s, done
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("supervisor did not return")
		return nil
	}
}

func notDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("supervisor returned early: %v", err)
	default:
	}
}

func (h *harness) setConns(t *testing.T, n int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, "conns"), []byte(strconv.Itoa(n)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEnvoyStartsWithArgsAndEnvironment(t *testing.T) {
	h := newHarness(t, "STANDIN_ENV_PROBE=passed-through")
	h.cfg.LogLevel = "info,misc:error"
	h.cfg.Concurrency = 2
	s, done := h.start(t, t.Context())
	var rec struct {
		Args  []string `json:"args"`
		Probe string   `json:"probe"`
	}
	b, err := os.ReadFile(filepath.Join(h.dir, "args.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Args, s.Args()) {
		t.Errorf("envoy got args\n%q\nwant\n%q", rec.Args, s.Args())
	}
	if rec.Probe != "passed-through" {
		t.Errorf("environment not passed through: probe=%q", rec.Probe)
	}
	if s.Pid() == 0 {
		t.Error("Pid is 0 after start")
	}
	s.Quit()
	if err := waitDone(t, done); err != nil {
		t.Fatalf("Run after Quit: %v", err)
	}
	h.ev.none(t, "drain")
	if _, err := os.Stat(h.cfg.BootstrapPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bootstrap not removed after exit: %v", err)
	}
}

func TestEnvoyCrashReportsItsExitCode(t *testing.T) {
	for _, reap := range []bool{false, true} {
		t.Run("reap="+strconv.FormatBool(reap), func(t *testing.T) {
			h := newHarness(t, "STANDIN_EXIT_CODE=3", "STANDIN_EXIT_AFTER_MS=50")
			h.cfg.ReapOrphans = reap
			_, done := h.start(t, t.Context())
			err := waitDone(t, done)
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != 3 {
				t.Fatalf("Run = %v, want ExitError with code 3", err)
			}
		})
	}
}

func TestEnvoyMissingBinary(t *testing.T) {
	h := newHarness(t)
	h.cfg.BinaryPath = filepath.Join(h.dir, "no-such-envoy")
	s, err := New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "no-such-envoy") {
		t.Fatalf("Run = %v, want an error naming the binary", err)
	}
}

func TestTerminationDrainDuration(t *testing.T) {
	h := newHarness(t)
	h.cfg.TerminationDrainDuration = 5 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	_, done := h.start(t, ctx)
	cancel()
	if ev := h.ev.wait(t, "drain"); ev != "drain POST graceful&inboundonly" {
		t.Errorf("drain request = %q", ev)
	}
	h.clock.WaitTimers(t, 1)
	h.clock.Advance(4999 * time.Millisecond)
	notDone(t, done)
	h.clock.Advance(time.Millisecond)
	if err := waitDone(t, done); err != nil {
		t.Fatalf("Run = %v, want nil after the drain period", err)
	}
}

func TestDrainWhenAdminDoesNotAnswer(t *testing.T) {
	// A hung Envoy: the drain request fails; the drain period still ends in a kill.
	h := newHarness(t, "STANDIN_IGNORE_TERM=1")
	h.cfg.AdminPort = freePort(t) // nothing listens here
	h.cfg.Sidecar = false
	ctx, cancel := context.WithCancel(t.Context())
	_, done := h.start(t, ctx)
	cancel()
	h.clock.WaitTimers(t, 1)
	h.clock.Advance(DefaultTerminationDrain)
	if err := waitDone(t, done); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestEnvoyExitsDuringDrain(t *testing.T) {
	h := newHarness(t, "STANDIN_DRAIN_EXIT_MS=30")
	ctx, cancel := context.WithCancel(t.Context())
	_, done := h.start(t, ctx)
	cancel()
	h.ev.wait(t, "drain")
	// The clock never moves: Envoy's own exit ends the drain.
	if err := waitDone(t, done); err != nil {
		t.Fatalf("Run = %v, want nil when envoy exits 0 while draining", err)
	}
}

func TestSecondSignalCutsDrainShort(t *testing.T) {
	h := newHarness(t)
	h.cfg.TerminationDrainDuration = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	s, done := h.start(t, ctx)
	cancel()
	h.ev.wait(t, "drain")
	h.clock.WaitTimers(t, 1)
	notDone(t, done)
	s.Quit()
	if err := waitDone(t, done); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestDrainNowThenShutdownStopsAtOnce(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	s, done := h.start(t, ctx)
	if err := s.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ev := h.ev.wait(t, "drain"); ev != "drain POST graceful&inboundonly&skip_exit" {
		t.Errorf("drain request = %q", ev)
	}
	notDone(t, done)
	cancel()
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	h.ev.none(t, "drain")
}

func TestExitOnZeroActiveConnections(t *testing.T) {
	h := newHarness(t)
	h.cfg.Env = append(h.cfg.Env, "STANDIN_CONNS_FILE="+filepath.Join(h.dir, "conns"))
	h.cfg.ExitOnZeroActiveConnections = true
	h.cfg.ExcludedListenerPorts = []int{15021, 15090}
	h.setConns(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	_, done := h.start(t, ctx)
	cancel()
	h.ev.wait(t, "drain")
	h.clock.WaitTimers(t, 2) // bound + minimum drain
	h.clock.Advance(DefaultMinDrain - time.Millisecond)
	h.clock.WaitTimers(t, 2)
	h.ev.none(t, "stats")
	h.clock.Advance(time.Millisecond) // minimum drain over: first poll one interval later
	h.clock.WaitTimers(t, 2)
	h.ev.none(t, "stats")
	h.clock.Advance(time.Second)
	if ev := h.ev.wait(t, "stats"); ev != "stats usedonly&filter=downstream_cx_active$" {
		t.Errorf("stats request = %q", ev)
	}
	h.clock.WaitTimers(t, 2) // 2 connections: poll again
	notDone(t, done)
	h.setConns(t, 0)
	h.clock.Advance(time.Second)
	h.ev.wait(t, "stats")
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestExitOnZeroActiveConnectionsUpperBound(t *testing.T) {
	h := newHarness(t)
	h.cfg.Env = append(h.cfg.Env, "STANDIN_CONNS_FILE="+filepath.Join(h.dir, "conns"))
	h.cfg.ExitOnZeroActiveConnections = true
	h.cfg.MinDrainDuration = 2 * time.Second
	h.cfg.MaxDrainDuration = 5 * time.Second
	h.setConns(t, 3)
	ctx, cancel := context.WithCancel(t.Context())
	_, done := h.start(t, ctx)
	cancel()
	h.clock.WaitTimers(t, 2)
	h.clock.Advance(2 * time.Second)
	for range 2 { // polls at 3 s and 4 s find 3 connections
		h.clock.WaitTimers(t, 2)
		h.clock.Advance(time.Second)
		h.ev.wait(t, "stats")
	}
	h.clock.WaitTimers(t, 2)
	notDone(t, done)
	h.clock.Advance(time.Second) // 5 s: the bound wins over the poll due at the same time
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestExitOnZeroActiveConnectionsStatsFailures(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		polls int
	}{{"error", DefaultMaxStatsErrors}, {"empty", 1}} {
		t.Run(tc.mode, func(t *testing.T) {
			h := newHarness(t, "STANDIN_STATS="+tc.mode)
			h.cfg.ExitOnZeroActiveConnections = true
			ctx, cancel := context.WithCancel(t.Context())
			_, done := h.start(t, ctx)
			cancel()
			h.clock.WaitTimers(t, 2)
			h.clock.Advance(DefaultMinDrain)
			for i := range tc.polls {
				h.clock.WaitTimers(t, 2)
				notDone(t, done)
				h.clock.Advance(time.Second)
				h.ev.wait(t, "stats")
				_ = i
			}
			if err := waitDone(t, done); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestQuitBeforeRun(t *testing.T) {
	h := newHarness(t)
	s, err := New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Quit()
	if err := s.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(t.Context()); err == nil {
		t.Fatal("second Run succeeded")
	}
	h.ev.none(t, "started")
}

func TestReapsOrphans(t *testing.T) {
	h := newHarness(t, "STANDIN_ORPHAN=1")
	h.cfg.ReapOrphans = true
	s, done := h.start(t, t.Context())
	pid, err := strconv.Atoi(strings.TrimPrefix(h.ev.wait(t, "orphan "), "orphan "))
	if err != nil {
		t.Fatal(err)
	}
	// The orphan was re-parented to this process and has exited: it must not stay a zombie.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, os.ErrNotExist) {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Fatalf("orphan %d not reaped: %s", pid, st)
		}
	}
	notDone(t, done)
	// Envoy's own status still reaches the supervisor.
	s.Quit()
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{AdminPort: 70000, DrainDuration: -time.Second})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, want := range []string{"BootstrapPath", "70000", "drain duration"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestRunsAsProxyUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to switch Envoy to uid 1337")
	}
	h := newHarness(t)
	h.cfg.RunAsProxyUser = true
	// The stand-in, now uid 1337, must reach its binary and write its record.
	for _, d := range []string{filepath.Dir(standinPath), filepath.Dir(h.dir), h.dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	s, done := h.start(t, t.Context())
	b, err := os.ReadFile(filepath.Join(h.dir, "args.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ UID, GID int }
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.UID != ProxyUID || rec.GID != ProxyGID {
		t.Errorf("envoy ran as %d:%d, want %d:%d", rec.UID, rec.GID, ProxyUID, ProxyGID)
	}
	s.Quit()
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
}
