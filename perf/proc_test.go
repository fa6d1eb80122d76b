package perf

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Stop must leave no process of the group behind, even one that ignores SIGTERM.
func TestStopKillsTheWholeGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	p, err := startProc("shell", dir, nil, "/bin/sh", "-c",
		`trap "" TERM; sleep 60 & echo $! > `+pidFile+`; wait`)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for child == 0 {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the shell never started its child")
		case <-time.After(5 * time.Millisecond): // waiting for the file to appear
		}
	}
	if u, err := ReadUsage(p.Pid()); err != nil || u.RSSKB <= 0 {
		t.Errorf("ReadUsage = %+v, %v", u, err)
	}
	p.Stop(200 * time.Millisecond)
	for {
		err := syscall.Kill(child, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		// The child may linger as a zombie of init for a moment; wait until it is gone.
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat"); strings.Contains(string(b), ") Z") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("child %d of the group survived Stop", child)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := p.ExitError(); err == nil || !strings.Contains(err.Error(), "shell exited") {
		t.Errorf("ExitError = %v", err)
	}
}

func TestReadUsageOfSelf(t *testing.T) {
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSSKB <= 0 || u.HWMKB < u.RSSKB || u.CPU <= 0 {
		t.Errorf("usage of the test process %+v", u)
	}
	if _, err := ReadUsage(1 << 30); err == nil {
		t.Error("usage of a pid that does not exist")
	}
}

func TestHubWaitsForEventsInOrder(t *testing.T) {
	h, err := NewHub(filepath.Join(t.TempDir(), "ev.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	mark := h.Mark()
	c, err := net.Dial("unix", strings.TrimPrefix(h.Spec(), "unix:"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := bufio.NewWriter(c)
	w.WriteString(`{"id":"a","ev":"push","version":"v1","t":1}` + "\n")
	w.WriteString("not json\n")
	w.WriteString(`{"id":"b","ev":"push","version":"v1","t":2}` + "\n")
	w.Flush()
	got, err := h.WaitAll(ctx, mark, []string{"a", "b"}, "v1", func(e Event) bool { return e.Version == "v1" })
	if err != nil || got["a"].T != 1 || got["b"].T != 2 {
		t.Fatalf("WaitAll = %v, %v", got, err)
	}
	if _, err := h.Wait(ctx, mark, "a bad line", func(e Event) bool { return e.Ev == "bad_event" }); err != nil {
		t.Errorf("a malformed line was not reported: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := h.Wait(short, h.Mark(), "v2", func(e Event) bool { return e.Version == "v2" }); !errors.Is(err, ErrNoEvent) {
		t.Errorf("Wait without the event = %v, want ErrNoEvent", err)
	}
}
