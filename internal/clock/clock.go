// Package clock is the one time source interface of the agent: every part whose behaviour
// depends on time (certificate rotation and validity, retry backoff, file debounce, Envoy's drain
// timelines) takes a Clock, and tests inject a fake that moves only when told to.
//
// Elapsed-time measurements reported as metrics (latencies) use the monotonic time.Now/time.Since
// directly: they decide nothing.
package clock

import "time"

// Clock is a source of the current time and of timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once d has elapsed on this clock (at once when d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the agent uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Real is the system clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
