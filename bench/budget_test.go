package bench

import (
	"runtime"
	"testing"
)

// Allocation budgets per forwarded push (issue 16, item 6): a 25% regression in allocations or
// in bytes allocated fails. The budgets are what Wingman measured in this harness (least of 3
// rounds of 20 pushes, process-wide counts: the raw-frame client and upstream included), on
// 2026-12-03 with go1.26.8; re-measure with `go test -run TestGateAllocBudget -v ./bench/` and
// update them when a change is meant to move them.
var allocBudgets = []struct {
	size, resources int
	allocs, bytes   float64
}{
	{1 << 20, 1000, budget1MBAllocs, budget1MBBytes},
	{4 << 20, 4000, budget4MBAllocs, budget4MBBytes},
}

const regressionTolerance = 1.25

// allocsPerPush returns the least allocations and bytes allocated per push over three rounds:
// process-wide counts move a little with GC timing (sync.Pool refills after a collection).
func allocsPerPush(t *testing.T, resp []byte, n int) (allocs, bytes float64) {
	c := newClient(t, startWingman(t, pingPong(t, resp)))
	c.push(t)
	allocs, bytes = -1, -1
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range n {
			c.push(t)
		}
		runtime.ReadMemStats(&after)
		a := float64(after.Mallocs-before.Mallocs) / float64(n)
		b := float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
		if allocs < 0 || a < allocs {
			allocs = a
		}
		if bytes < 0 || b < bytes {
			bytes = b
		}
	}
	return allocs, bytes
}

func TestGateAllocBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation gates run without the race detector (make gate)")
	}
	for _, b := range allocBudgets {
		allocs, bytes := allocsPerPush(t, response(t, b.size, b.resources), 20)
		t.Logf("%d KiB push: %.1f allocs (budget %.0f, fails above %.1f), %.0f bytes (budget %.0f, fails above %.0f)",
			b.size>>10, allocs, b.allocs, b.allocs*regressionTolerance, bytes, b.bytes, b.bytes*regressionTolerance)
		if allocs > b.allocs*regressionTolerance {
			t.Errorf("%d KiB push: %.1f allocations, more than 1.25x the budget of %.0f", b.size>>10, allocs, b.allocs)
		}
		if bytes > b.bytes*regressionTolerance {
			t.Errorf("%d KiB push: %.0f bytes allocated, more than 1.25x the budget of %.0f", b.size>>10, bytes, b.bytes)
		}
	}
}

// Measured 2026-12-03 (3 runs): 1 MiB push 51.5-54.8 allocs, 11.3-25.0 KB; 4 MiB push 120.2-127.2
// allocs, 45.9-48.5 KB. Allocation counts are near-exact, so their budget is the highest count
// seen; bytes move with pool refills after a collection, so theirs is the highest seen too, which
// leaves a regression of 25% of the budget, or any extra copy of a message, failing.
const (
	budget1MBAllocs = 56
	budget1MBBytes  = 25_000
	budget4MBAllocs = 128
	budget4MBBytes  = 50_000
)
