package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// reaper waits for every exited child of the process (the agent as PID 1 inherits orphans) and
// hands the statuses of watched children (Envoy) to their owner, so that no status is lost.
type reaper struct {
	log  *slog.Logger   // immutable
	sigs chan os.Signal // SIGCHLD notifications; registered in newReaper

	// mu guards watched and is held across each process start and each wait4 sweep, so that a
	// child that exits at once is always registered before it can be reaped.
	mu      sync.Mutex
	watched map[int]chan<- exitResult // buffered 1
}

func newReaper(log *slog.Logger) *reaper {
	r := &reaper{log: log, sigs: make(chan os.Signal, 1), watched: make(map[int]chan<- exitResult)}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	return r
}

// start runs fn (which starts a process) with the sweep excluded and watches the new process:
// its status is sent to ch (capacity ≥ 1) when it exits.
func (r *reaper) start(fn func() (*os.Process, error), ch chan<- exitResult) (*os.Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := fn()
	if err == nil {
		r.watched[p.Pid] = ch
	}
	return p, err
}

// run sweeps on every SIGCHLD until ctx is done, then stops the notifications.
func (r *reaper) run(ctx context.Context) {
	defer signal.Stop(r.sigs)
	r.sweep()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.sigs:
			r.sweep()
		}
	}
}

// sweep reaps every exited child without blocking.
func (r *reaper) sweep() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 { // ECHILD: no children; 0: none exited yet
			return
		}
		if ch, ok := r.watched[pid]; ok {
			delete(r.watched, pid)
			ch <- exitResult{status: syscall.WaitStatus(ws)}
			continue
		}
		r.log.Debug("reaped orphan process", "pid", pid, "status", int(ws))
	}
}
