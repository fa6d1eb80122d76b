package bench

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// measure runs n pushes of resp through a proxy (after one warm-up push) and returns the time
// and the allocations per push, counted process-wide: the client and the upstream are the same
// raw-frame code for both proxies, so differences are the proxy's.
func measure(t *testing.T, start func(testing.TB, string) string, resp []byte, n int) (time.Duration, float64) {
	c := newClient(t, start(t, pingPong(t, resp)))
	c.push(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	for range n {
		c.push(t)
	}
	d := time.Since(t0) / time.Duration(n)
	runtime.ReadMemStats(&after)
	return d, float64(after.Mallocs-before.Mallocs) / float64(n)
}

// TestGateAllocsFlatInResources: allocations per forwarded message must not grow with the number
// of resources in it. Same bytes, 10 or 10,000 resources: the proxy walks the top-level fields
// only, skipping each resource by its length.
func TestGateAllocsFlatInResources(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation gates run without the race detector (make gate)")
	}
	// The proxy's own counts, in a child process; the least of three rounds (sync.Pool refills
	// after a collection move them a little). Growth per resource would add thousands.
	least := func(n int) float64 {
		best := -1.0
		for range 3 {
			if a, _ := allocsPerPush(t, response(t, 1<<20, n), 50); best < 0 || a < best {
				best = a
			}
		}
		return best
	}
	few, many := least(10), least(10000)
	t.Logf("allocs per 1 MB push: %.1f with 10 resources, %.1f with 10,000", few, many)
	if many > few*1.1+3 {
		t.Fatalf("allocations grow with resources: %.1f (10,000) vs %.1f (10)", many, few)
	}
}

// TestGateVersusReference: in one run, interleaved, Wingman's proxy must beat the reference by
// the factors. Allocations are exact; the time ratio is the median of interleaved
// rounds, gated with headroom over the 0.5 target because this machine is shared and noisy (the
// figure itself is reported in bench/README.md).
func TestGateVersusReference(t *testing.T) {
	if raceEnabled {
		t.Skip("ratio gates run without the race detector (make gate)")
	}
	resp := response(t, 4<<20, 4000)
	var ratios []float64
	var wAllocs, rAllocs float64
	for range 5 {
		wt, wa := measure(t, startWingman, resp, 8)
		rt, ra := measure(t, startReference, resp, 8)
		ratios = append(ratios, float64(wt)/float64(rt))
		wAllocs, rAllocs = wa, ra
	}
	slices.Sort(ratios)
	median := ratios[len(ratios)/2]
	t.Logf("4 MB push: time ratio wingman/reference median %.2f (rounds %.2f); allocs %.0f vs %.0f (1/%.0f)",
		median, ratios, wAllocs, rAllocs, rAllocs/wAllocs)
	if wAllocs*10 > rAllocs {
		t.Errorf("allocations per 4 MB push %.0f, want <= 1/10 of the reference's %.0f", wAllocs, rAllocs)
	}
	if median > 0.75 {
		t.Errorf("time per 4 MB push is %.2f of the reference's, want <= 0.75 (target 0.5)", median)
	}
}
