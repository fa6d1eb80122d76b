package bench

import "testing"

// TestGatePeakHeap10MB runs the proxy alone in a child process and pushes a 10 MB response
// through it five times. Issue 16's target for cut-through forwarding is at most 2 MiB above idle
// while it passes. Measured 1.75-1.92 MiB above idle; the gate fails at 2.3 MiB, 1.2x the most
// measured, so a 25% regression fails (before cut-through the proxy held the whole message:
// 12.3 MB peak).
func TestGatePeakHeap10MB(t *testing.T) {
	if raceEnabled {
		t.Skip("heap gates run without the race detector (make gate)")
	}
	resp := response(t, 10<<20, 10000)
	child := startChild(t, resp)
	c := newClient(t, child.sock)
	for range 5 {
		if c.push(t) != len(resp) {
			t.Fatal("short push")
		}
	}
	idle, peak, _, _ := child.report(t)
	const target, limit = 2 << 20, 23 << 20 / 10 // 2 MiB; fails above 2.3 MiB
	above := int64(peak) - int64(idle)
	t.Logf("10 MB push: proxy heap idle %.2f MiB, peak %.2f MiB: %.2f MiB above idle (target %.1f MiB, fails above %.1f MiB; message %.1f MiB)",
		float64(idle)/(1<<20), float64(peak)/(1<<20), float64(above)/(1<<20), float64(target)/(1<<20), float64(limit)/(1<<20), float64(len(resp))/(1<<20))
	if above > limit {
		t.Fatalf("peak heap %d bytes above idle during a 10 MB push, more than %d", above, limit)
	}
}
