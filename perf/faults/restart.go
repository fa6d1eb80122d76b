package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The proxy directory on a tmpfs and the agent's restart, for the last-state scenarios.

// ProxyDir is the agent's ./etc/istio/proxy.
func (r *Rig) ProxyDir() string { return filepath.Join(r.Dir, "etc/istio/proxy") }

func (r *Rig) mountProxyTmpfs() error {
	dir := r.ProxyDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=64m,mode=0755"); err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", dir, err)
	}
	r.tmpfs = dir
	return nil
}

func (r *Rig) unmountProxyTmpfs() {
	if r.tmpfs != "" {
		_ = syscall.Unmount(r.tmpfs, syscall.MNT_DETACH)
		r.tmpfs = ""
	}
}

// KillAgent kills the agent and the stand-in it runs (SIGKILL to the process group: as a
// container's processes all die at once) and waits until both are gone.
func (r *Rig) KillAgent(ctx context.Context) error {
	stub, err := r.StubPid()
	if err != nil {
		return err
	}
	if err := syscall.Kill(-r.agent.Process.Pid, syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The stand-in, reparented, is reaped by whoever adopts it: wait until its pid is gone.
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(stub)); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the stand-in (pid %d) outlived the agent: %w", stub, ctx.Err())
		case <-time.After(10 * time.Millisecond): // no event tells that a reparented process was reaped
		}
	}
}

// RestartAgent starts the agent again in the same directory (after KillAgent) and returns when
// it was started.
func (r *Rig) RestartAgent(cfg RigConfig) (time.Time, error) {
	r.done = make(chan struct{})
	t0 := time.Now()
	return t0, r.startAgent(cfg)
}

// WaitReady polls the agent's readiness (/healthz/ready, as kubelet does) until it answers 200
// and returns when it did.
func (r *Rig) WaitReady(ctx context.Context) (time.Time, error) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(statusPort)+"/healthz/ready", nil)
		if err != nil {
			return time.Time{}, err
		}
		if resp, err := r.http.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now(), nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, r.wrap(fmt.Errorf("agent never ready: %w", ctx.Err()))
		case <-time.After(20 * time.Millisecond): // kubelet polls too; 20 ms is the figure's resolution
		}
	}
}
