// Package supervisor runs Envoy for the agent: it execs the binary with Istio's arguments, drains
// it on shutdown the way Istio does (terminationDrainDuration, or MINIMUM_DRAIN_DURATION then
// polling active connections, here with an upper bound), serves the /quitquitquit and /drain
// shortcuts, reaps orphans when the agent is PID 1, and reports Envoy's own exit.
//
// Departure from Istio: when Envoy exits on its own, Run returns an *ExitError carrying Envoy's
// exit code (128+signal when killed by a signal) and the agent exits with it; Istio's agent exits 0
// whatever Envoy did. When the agent stops Envoy itself (after a drain, Quit or a second signal),
// Run returns nil.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// ExitError reports that Envoy exited on its own.
type ExitError struct {
	Code   int    // exit status, or 128+signal number when killed by a signal
	Status string // e.g. "exit status 1", "signal: killed"
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("envoy exited on its own with code %d (%s)", e.Code, e.Status)
}

// exitResult is what the waiter hands to Run when Envoy is reaped.
type exitResult struct {
	status syscall.WaitStatus
	err    error // wait itself failed (not expected)
}

func (r exitResult) code() int {
	switch {
	case r.err != nil:
		return 255
	case r.status.Exited():
		return r.status.ExitStatus()
	case r.status.Signaled():
		return 128 + int(r.status.Signal())
	}
	return 255
}

func (r exitResult) String() string {
	switch {
	case r.err != nil:
		return r.err.Error()
	case r.status.Exited():
		return fmt.Sprintf("exit status %d", r.status.ExitStatus())
	case r.status.Signaled():
		return "signal: " + r.status.Signal().String()
	}
	return fmt.Sprintf("wait status %#x", uint32(r.status))
}

// Supervisor runs one Envoy process. Run may be called once; Quit and Drain from any goroutine.
type Supervisor struct {
	cfg      Config          // immutable after New
	args     []string        // immutable after New
	admin    *adminClient    // immutable after New
	excluded map[string]bool // immutable after New

	started  chan struct{} // closed once Envoy has been exec'd
	quit     chan struct{} // closed by Quit
	quitOnce sync.Once

	mu        sync.Mutex // guards the fields below
	skipDrain bool       // Drain or Quit was called: shutdown stops Envoy at once
	pid       int
	ran       bool
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Supervisor, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Supervisor{
		cfg:      c,
		args:     Args(c),
		admin:    newAdminClient(c.AdminHost, c.AdminPort),
		excluded: excludedListeners(c.ExcludedListenerPorts),
		started:  make(chan struct{}),
		quit:     make(chan struct{}),
	}, nil
}

// Args returns the command line Envoy is started with (without argv[0]).
func (s *Supervisor) Args() []string { return append([]string(nil), s.args...) }

// Started is closed once Envoy's process has been created.
func (s *Supervisor) Started() <-chan struct{} { return s.started }

// Pid is Envoy's process id, 0 before it is started.
func (s *Supervisor) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Quit stops Envoy without draining (/quitquitquit, or a second SIGTERM during a drain).
func (s *Supervisor) Quit() {
	s.mu.Lock()
	s.skipDrain = true
	s.mu.Unlock()
	s.quitOnce.Do(func() { close(s.quit) })
}

// Drain drains Envoy's listeners now and keeps it running (/drain):
// drain_listeners?graceful[&inboundonly]&skip_exit. A later shutdown stops Envoy at once.
func (s *Supervisor) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.skipDrain = true
	s.mu.Unlock()
	if err := s.admin.drainListeners(ctx, s.cfg.Sidecar, true); err != nil {
		return fmt.Errorf("draining envoy: %w", err)
	}
	return nil
}

// Run starts Envoy and returns when it is gone: when it exits on its own (*ExitError), or after
// ctx is cancelled and the shutdown drain is over (nil), or after Quit (nil).
func (s *Supervisor) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.ran {
		s.mu.Unlock()
		return errors.New("supervisor: Run called twice")
	}
	s.ran = true
	s.mu.Unlock()
	defer s.admin.close()

	select {
	case <-s.quit:
		return nil
	case <-ctx.Done():
		return nil
	default:
	}

	exited := make(chan exitResult, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	var proc *os.Process
	var err error
	if s.cfg.ReapOrphans {
		r := newReaper(s.cfg.Logger)
		// The reaper outlives ctx: Envoy must still be reaped after a shutdown drain.
		rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		defer stop()
		wg.Go(func() { r.run(rctx) })
		proc, err = r.start(s.startProcess, exited)
	} else {
		proc, err = s.startProcess()
		if err == nil {
			wg.Go(func() {
				st, werr := proc.Wait()
				if werr != nil {
					exited <- exitResult{err: fmt.Errorf("waiting for envoy: %w", werr)}
					return
				}
				exited <- exitResult{status: st.Sys().(syscall.WaitStatus)}
			})
		}
	}
	if err != nil {
		return err
	}
	defer proc.Release()
	s.mu.Lock()
	s.pid = proc.Pid
	s.mu.Unlock()
	close(s.started)
	s.cfg.Logger.Info("envoy started", "pid", proc.Pid, "binary", s.cfg.BinaryPath, "args", s.args)

	select {
	case r := <-exited:
		s.cleanup()
		if r.status.Signaled() && r.status.Signal() == syscall.SIGKILL {
			s.cfg.Logger.Warn("envoy was killed; it may have run out of memory, check its memory usage and limits")
		}
		s.cfg.Logger.Error("envoy exited on its own", "status", r.String())
		return &ExitError{Code: r.code(), Status: r.String()}
	case <-s.quit:
		s.cfg.Logger.Info("stopping envoy without draining")
		return s.stop(proc, exited)
	case <-ctx.Done():
		return s.terminate(ctx, proc, exited)
	}
}

func (s *Supervisor) startProcess() (*os.Process, error) {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("starting envoy: %w", err)
	}
	defer devnull.Close()
	stdout, stderr := s.cfg.Stdout, s.cfg.Stderr
	if stdout == nil {
		stdout = devnull
	}
	if stderr == nil {
		stderr = devnull
	}
	attr := &os.ProcAttr{Env: s.cfg.Env, Files: []*os.File{devnull, stdout, stderr}}
	if s.cfg.RunAsProxyUser {
		attr.Sys = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ProxyUID, Gid: ProxyGID}}
	}
	argv := append([]string{s.cfg.BinaryPath}, s.args...)
	p, err := os.StartProcess(s.cfg.BinaryPath, argv, attr)
	if err != nil {
		return nil, fmt.Errorf("starting envoy: %w", err)
	}
	return p, nil
}

// terminate drains Envoy after ctx was cancelled, then stops it.
func (s *Supervisor) terminate(ctx context.Context, proc *os.Process, exited <-chan exitResult) error {
	s.mu.Lock()
	skip := s.skipDrain
	s.mu.Unlock()
	if skip {
		s.cfg.Logger.Info("envoy already drained or draining disabled; stopping it now")
		return s.stop(proc, exited)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StatsTimeout)
	err := s.admin.drainListeners(dctx, s.cfg.Sidecar, false)
	cancel()
	if err != nil {
		s.cfg.Logger.Warn("draining envoy listeners failed", "error", err)
	}
	if s.cfg.ExitOnZeroActiveConnections {
		return s.drainUntilIdle(ctx, proc, exited)
	}
	s.cfg.Logger.Info("graceful termination period started", "duration", s.cfg.TerminationDrainDuration)
	t := s.cfg.Clock.NewTimer(s.cfg.TerminationDrainDuration)
	defer t.Stop()
	select {
	case r := <-exited:
		return s.exitedDuringDrain(r)
	case <-t.C():
		s.cfg.Logger.Info("graceful termination period over; stopping envoy")
	case <-s.quit:
		s.cfg.Logger.Info("drain cut short; stopping envoy")
	}
	return s.stop(proc, exited)
}

// drainUntilIdle waits MinDrainDuration, then polls Envoy's active connections every
// StatsPollInterval and stops Envoy at zero, when no stats come back, after MaxStatsErrors
// failures in a row, or once MaxDrainDuration has passed since the drain began.
func (s *Supervisor) drainUntilIdle(ctx context.Context, proc *os.Process, exited <-chan exitResult) error {
	log := s.cfg.Logger
	log.Info("draining envoy, then waiting for active connections to close",
		"minimum", s.cfg.MinDrainDuration, "maximum", s.cfg.MaxDrainDuration)
	deadline := s.cfg.Clock.NewTimer(s.cfg.MaxDrainDuration)
	defer deadline.Stop()
	wait := s.cfg.Clock.NewTimer(s.cfg.MinDrainDuration)
	defer func() { wait.Stop() }()
	polling := false
	failures := 0
	for {
		select {
		case r := <-exited:
			return s.exitedDuringDrain(r)
		case <-deadline.C():
			log.Warn("maximum drain duration reached with connections still active; stopping envoy",
				"maximum", s.cfg.MaxDrainDuration)
			return s.stop(proc, exited)
		case <-s.quit:
			log.Info("drain cut short; stopping envoy")
			return s.stop(proc, exited)
		case <-wait.C():
		}
		if polling {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StatsTimeout)
			body, err := s.admin.stats(rctx)
			cancel()
			if err != nil {
				failures++
				log.Warn("reading envoy's active connections failed", "error", err, "failures", failures)
				if failures >= s.cfg.MaxStatsErrors {
					log.Error("too many failures reading active connections; stopping envoy")
					return s.stop(proc, exited)
				}
			} else {
				failures = 0
				n, ok := activeConnections(body, s.excluded)
				if !ok {
					log.Info("downstream_cx_active stats are not available; stopping envoy")
					return s.stop(proc, exited)
				}
				if n == 0 {
					log.Info("no active connections left; stopping envoy")
					return s.stop(proc, exited)
				}
				log.Info("connections still active", "count", n)
			}
		}
		polling = true
		wait = s.cfg.Clock.NewTimer(s.cfg.StatsPollInterval)
	}
}

// stop kills Envoy (SIGKILL, as Istio does once the drain is over) and waits for it.
func (s *Supervisor) stop(proc *os.Process, exited <-chan exitResult) error {
	if err := proc.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.cfg.Logger.Warn("killing envoy failed", "error", err)
	}
	r := <-exited
	s.cleanup()
	s.cfg.Logger.Info("envoy stopped", "status", r.String())
	return nil
}

// exitedDuringDrain reports an exit Envoy made on its own while draining: code 0 is the expected
// end of a drain, anything else is reported.
func (s *Supervisor) exitedDuringDrain(r exitResult) error {
	s.cleanup()
	if r.err == nil && r.status.Exited() && r.status.ExitStatus() == 0 {
		s.cfg.Logger.Info("envoy exited while draining")
		return nil
	}
	s.cfg.Logger.Error("envoy failed while draining", "status", r.String())
	return &ExitError{Code: r.code(), Status: r.String()}
}

func (s *Supervisor) cleanup() {
	if !s.cfg.RemoveBootstrapOnExit {
		return
	}
	if err := os.Remove(s.cfg.BootstrapPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.cfg.Logger.Warn("removing envoy bootstrap failed", "path", s.cfg.BootstrapPath, "error", err)
	}
}
