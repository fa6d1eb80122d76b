package main

import (
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// rssFileKB reads RssFile (mapped file pages) of a process, in KiB.
func rssFileKB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skip("no /proc status:", err)
	}
	m := regexp.MustCompile(`RssFile:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Skip("no RssFile in /proc status")
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// An idle agent unmaps its binary's read-only pages once start-up is over (memtrim.go): its
// mapped file pages fall to a fraction of the binary, which start-up had mapped nearly whole.
func TestIdleAgentUnmapsItsBinary(t *testing.T) {
	p := newPod(t, "")
	c, _, errb := p.cmd(t, "proxy", "sidecar", "--log_output_level=default:warn")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	p.wait(t, "started")
	st, err := os.Stat(agentBin)
	if err != nil {
		t.Fatal(err)
	}
	binKB := st.Size() / 1024
	first := rssFileKB(t, c.Process.Pid)
	var last int64
	// No event tells when the pages are unmapped: poll the kernel's figure, bounded.
	for deadline := time.Now().Add(20 * time.Second); ; {
		if last = rssFileKB(t, c.Process.Pid); last < binKB/3 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("RssFile %d KiB at Envoy's start, still %d KiB 20 s later; want < %d KiB (a third of the %d KiB binary)",
				first, last, binKB/3, binKB)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("RssFile %d KiB when Envoy started, %d KiB after the trim (binary %d KiB)", first, last, binKB)
	c.Process.Signal(syscall.SIGTERM)
	p.wait(t, "drain")
	c.Process.Signal(syscall.SIGINT) // skip the drain period
	if err := c.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, errb)
	}
}
