package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a child process in its own process group. The group is what gets signalled, so
// that what the child started (Envoy) goes with it.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when Wait returned
	err  error         // Wait's result; read after done
}

func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited says whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the group, waits up to grace, then SIGKILLs the group. It returns the
// process's exit code (-1 when killed by a signal) and how long it took to exit.
func (p *proc) stop(grace time.Duration) (int, time.Duration, error) {
	start := time.Now()
	pgid := p.cmd.Process.Pid
	if !p.exited() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	var err error
	select {
	case <-p.done:
	case <-time.After(grace):
		err = fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.name, grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	took := time.Since(start)
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // whatever is left in the group
	code := 0
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		code = exit.ExitCode()
	} else if p.err != nil && err == nil {
		err = p.err
	}
	return code, took, err
}

// leftovers finds processes still running one of the given executables (the demo's own
// builds have unique paths, so nothing else can match), kills them and returns a description.
func leftovers(exes ...string) []string {
	want := map[string]bool{}
	for _, e := range exes {
		if e != "" {
			want[e] = true
		}
	}
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		exe = strings.TrimSuffix(exe, " (deleted)")
		if want[exe] {
			found = append(found, fmt.Sprintf("pid %d (%s)", pid, filepath.Base(exe)))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return found
}

// freePorts returns n distinct TCP ports that were free a moment ago (also checked for UDP,
// for the DNS port).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		u.Close()
		ports = append(ports, port)
	}
	return ports, nil
}

// moduleRoot finds the Wingman module root from the working directory upwards.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/wingman-mesh/wingman\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the Wingman module (no go.mod naming github.com/wingman-mesh/wingman above the working directory)")
		}
		dir = parent
	}
}

// BuildError is a failure to build one of the programs the demo runs.
type BuildError struct {
	Pkg    string
	Output string
	Err    error
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("go build %s: %v\n%s", e.Pkg, e.Err, strings.TrimSpace(e.Output))
}

func (e *BuildError) Unwrap() error { return e.Err }

// goBuild builds pkg (relative to the module root) into out.
func goBuild(ctx context.Context, root, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		return &BuildError{Pkg: pkg, Output: string(b), Err: err}
	}
	return nil
}
