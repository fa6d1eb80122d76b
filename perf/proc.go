package perf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process in a process group of its own. Stop ends the whole group.
type Proc struct {
	Name string
	cmd  *exec.Cmd     // immutable after startProc
	out  *TailBuffer   // last output lines, for error messages
	done chan struct{} // closed when the process has been waited for
	err  error         // set before done is closed
}

// TailBuffer keeps the last Max bytes written (8 KiB when Max is 0), for error messages about
// a child process. Safe for the child's output goroutine and a reader.
type TailBuffer struct {
	Max int

	mu sync.Mutex // guards b
	b  []byte
}

func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := t.Max
	if limit == 0 {
		limit = 8 << 10
	}
	t.b = append(t.b, p...)
	if len(t.b) > limit {
		t.b = append([]byte(nil), t.b[len(t.b)-limit:]...)
	}
	return len(p), nil
}

func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// Last returns the last n lines kept, joined by newlines.
func (t *TailBuffer) Last(n int) string {
	lines := strings.Split(t.String(), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func startProc(name, dir string, env []string, bin string, args ...string) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	p := &Proc{Name: name, cmd: cmd, out: &TailBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitError describes how the process ended and its last output.
func (p *Proc) ExitError() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	return fmt.Errorf("%s exited: %v; output: %s", p.Name, p.err, lastLines(p.out.String(), 8))
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Stop sends SIGTERM to the group, waits up to grace, then SIGKILLs the group. It always
// leaves no process of the group behind and returns once the leader has been waited for.
func (p *Proc) Stop(grace time.Duration) {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // the rest of the group (Envoy under an agent)
	<-p.done
}

// Usage is one reading of a process's memory and CPU.
type Usage struct {
	// RSSKB and HWMKB are VmRSS and VmHWM: resident pages of every kind, the binary's mapped
	// file pages included, which the kernel may drop and fault back in at will and which agents
	// on one node share. They are reported for information; no gate or target reads them.
	RSSKB, HWMKB int64
	AnonKB       int64         // RssAnon: heap, stacks (the rest of VmRSS is mapped files and shmem)
	FileKB       int64         // RssFile + RssShmem: the mapped binary, libraries and shared memory
	PssKB        int64         // proportional set size: pages shared with other processes (the binary) split among them
	CPU          time.Duration // on-CPU time of all threads
}

// PeakAnonKB is the anonymous memory at the peak since the last ResetPeak: the kernel keeps
// no high-water mark of RssAnon alone, so it is VmHWM less the file-backed pages resident now.
// The binary's pages are faulted in before the pushes a phase measures and do not grow
// during them, so the difference is the peak's heap and stacks.
func (u Usage) PeakAnonKB() int64 { return max(u.HWMKB-u.FileKB, u.AnonKB) }

// ReadUsage reads /proc/<pid>/status and the per-thread schedstat (nanosecond CPU time), or
// utime+stime from /proc/<pid>/stat when schedstat is not available.
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "VmRSS":
			u.RSSKB = parseKB(v)
		case "VmHWM":
			u.HWMKB = parseKB(v)
		case "RssAnon":
			u.AnonKB = parseKB(v)
		case "RssFile", "RssShmem":
			u.FileKB += parseKB(v)
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				u.PssKB = parseKB(v)
			}
		}
	}
	cpu, err := schedCPU(pid)
	if err != nil {
		cpu, err = statCPU(pid)
	}
	u.CPU = cpu
	return u, err
}

func parseKB(v string) int64 {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}

func schedCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, errors.New("no schedstat")
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread has just exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %w", t, err)
		}
		total += n
	}
	return time.Duration(total), nil
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func statCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0, fmt.Errorf("stat of pid %d: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("stat of pid %d: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// ResetPeak resets VmHWM to the current RSS (clear_refs 5), so a later VmHWM is the peak of
// what follows. It reports whether the kernel allowed it.
func ResetPeak(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}
