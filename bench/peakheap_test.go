package bench

import (
	"slices"
	"testing"
)

// TestGatePeakHeap10MB runs the proxy alone in a child process and pushes a 10 MB response
// through it five times. Issue 16's target for cut-through forwarding is at most 2 MiB above idle
// while it passes. Measured 1.21-1.46 MiB above idle in single runs (own HTTP/2 framing; 1.75-1.92
// on net/http's), so the gate takes the median of three children and fails above 1.65 MiB, 1.2x
// the usual 1.35: a 25% regression fails (before cut-through the proxy held the whole message:
// 12.3 MB peak).
func TestGatePeakHeap10MB(t *testing.T) {
	if raceEnabled {
		t.Skip("heap gates run without the race detector (make gate)")
	}
	resp := response(t, 10<<20, 10000)
	// The median of three children: one run's peak moves about 10% with GC timing.
	var runs []int64
	var idle, peak uint64
	for range 3 {
		child := startChild(t, resp)
		c := newClient(t, child.sock)
		for range 5 {
			if c.push(t) != len(resp) {
				t.Fatal("short push")
			}
		}
		idle, peak, _, _ = child.report(t)
		runs = append(runs, int64(peak)-int64(idle))
	}
	slices.Sort(runs)
	const target, limit = 2 << 20, 165 << 20 / 100 // 2 MiB; fails above 1.65 MiB
	above := runs[1]
	t.Logf("10 MB push: proxy heap above idle %.2f MiB (median of %.2f, %.2f, %.2f; last idle %.2f MiB, peak %.2f MiB); target %.1f MiB, fails above %.2f MiB; message %.1f MiB",
		float64(above)/(1<<20), float64(runs[0])/(1<<20), float64(runs[1])/(1<<20), float64(runs[2])/(1<<20),
		float64(idle)/(1<<20), float64(peak)/(1<<20), float64(target)/(1<<20), float64(limit)/(1<<20), float64(len(resp))/(1<<20))
	if above > limit {
		t.Fatalf("peak heap %d bytes above idle during a 10 MB push, more than %d", above, limit)
	}
}
