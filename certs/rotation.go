package certs

import (
	"math/rand/v2"
	"time"
)

// graceRatio moves base by up to ±jitter; u is uniform in [0, 1).
func graceRatio(base, jitter, u float64) float64 { return base + jitter*(2*u-1) }

// rotationTime is when a certificate valid over [notBefore, notAfter) must be replaced: ratio of
// its lifetime before it expires (Istio: expiry − SECRET_GRACE_PERIOD_RATIO × lifetime).
func rotationTime(notBefore, notAfter time.Time, ratio float64) time.Time {
	life := notAfter.Sub(notBefore)
	return notAfter.Add(-time.Duration(ratio * float64(life)))
}

// rotationDue reports whether, at now, a certificate valid over [notBefore, notAfter) with the
// given grace ratio must be replaced. Pure: the rotation decision depends only on its arguments.
func rotationDue(now, notBefore, notAfter time.Time, ratio float64) bool {
	return !now.Before(rotationTime(notBefore, notAfter, ratio))
}

// backoff is Istio's fetch backoff: start at initial, ×1.5 up to max, each wait ±50% jittered.
// Owned by one goroutine.
type backoff struct {
	initial, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.initial
	}
	d := b.cur/2 + rand.N(b.cur)
	b.cur = min(b.cur*3/2, b.max)
	return d
}

func (b *backoff) reset() { b.cur = 0 }
