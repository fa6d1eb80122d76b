package certs

import (
	"testing"
	"time"
)

// TestRotationMaths: the rotation decision is a pure function of (now, certificate validity).
func TestRotationMaths(t *testing.T) {
	nb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	na := nb.Add(24 * time.Hour)
	for _, tc := range []struct {
		now   time.Duration // after notBefore
		ratio float64
		due   bool
	}{
		{0, 0.5, false},
		{12*time.Hour - time.Nanosecond, 0.5, false},
		{12 * time.Hour, 0.5, true},
		{20 * time.Hour, 0.5, true},
		{17 * time.Hour, 0.25, false},
		{18 * time.Hour, 0.25, true},
		{48 * time.Hour, 0.5, true},
	} {
		if got := rotationDue(nb.Add(tc.now), nb, na, tc.ratio); got != tc.due {
			t.Errorf("now=+%v ratio=%v: due=%v, want %v", tc.now, tc.ratio, got, tc.due)
		}
	}
	if r := graceRatio(0.5, 0.01, 0); r != 0.49 {
		t.Errorf("graceRatio low end %v", r)
	}
	if r := graceRatio(0.5, 0.01, 0.5); r != 0.5 {
		t.Errorf("graceRatio middle %v", r)
	}
	// Istio's default: 24h certificate, ratio 0.5 ± 0.01 → 12h ± 14.4min.
	lo, hi := rotationTime(nb, na, graceRatio(0.5, 0.01, 0.9999)), rotationTime(nb, na, graceRatio(0.5, 0.01, 0))
	if lo.Sub(nb) < 12*time.Hour-15*time.Minute || hi.Sub(nb) > 12*time.Hour+15*time.Minute {
		t.Errorf("jitter window %v..%v", lo.Sub(nb), hi.Sub(nb))
	}
}

// TestBackoff: Istio's 500ms ×1.5 up to 60s, ±50%.
func TestBackoff(t *testing.T) {
	b := backoff{initial: 500 * time.Millisecond, max: 60 * time.Second}
	base := 500 * time.Millisecond
	for range 20 {
		d := b.next()
		if d < base/2 || d >= base*3/2 {
			t.Fatalf("wait %v outside %v ± 50%%", d, base)
		}
		base = min(base*3/2, 60*time.Second)
	}
	b.reset()
	if d := b.next(); d >= 750*time.Millisecond {
		t.Fatalf("after reset: %v", d)
	}
}
