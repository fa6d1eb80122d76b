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
// mapped file pages fall well below the binary's size, which start-up had mapped nearly whole.
// They grow back as the agent runs (here: its retries against an unreachable Istiod, and the GC,
// which reads the binary's tables) — 1.9 → 9 MB within 2 s, so the test looks for the dip.
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
	low := first
	// No event tells when the pages are unmapped: poll the kernel's figure, finely and bounded.
	for deadline := time.Now().Add(20 * time.Second); low >= binKB/2; {
		low = min(low, rssFileKB(t, c.Process.Pid))
		if time.Now().After(deadline) {
			t.Errorf("RssFile %d KiB at Envoy's start, never below %d KiB in 20 s; want < %d KiB (half the %d KiB binary)",
				first, low, binKB/2, binKB)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("RssFile %d KiB when Envoy started, %d KiB after the trim (binary %d KiB)", first, low, binKB)
	c.Process.Signal(syscall.SIGTERM)
	p.wait(t, "drain")
	c.Process.Signal(syscall.SIGINT) // skip the drain period
	if err := c.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, errb)
	}
}
