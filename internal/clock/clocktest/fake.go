// Package clocktest holds a fake clock.Clock for tests: time moves only when the test says so,
// and a test can wait until the code under test has armed its timers (events, not sleeps).
// Only tests import it.
package clocktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/internal/clock"
)

// Fake is a clock.Clock whose timers fire only when the test moves it. Safe for concurrent use.
type Fake struct {
	mu      sync.Mutex // guards the fields below
	now     time.Time
	timers  map[*timer]struct{} // pending
	changed chan struct{}       // closed and replaced whenever the pending set changes
}

var _ clock.Clock = (*Fake)(nil)

type timer struct {
	c  *Fake
	at time.Time
	ch chan time.Time // capacity 1
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, timers: map[*timer]struct{}{}, changed: make(chan struct{})}
}

// Now is the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d; at once when d <= 0.
func (c *Fake) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = struct{}{}
	c.notifyLocked()
	return t
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if _, ok := t.c.timers[t]; !ok {
		return false
	}
	delete(t.c.timers, t)
	t.c.notifyLocked()
	return true
}

func (c *Fake) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Set moves the clock to t (never backwards) and fires every timer due by then.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	for tm := range c.timers {
		if !tm.at.After(c.now) {
			tm.ch <- c.now
			delete(c.timers, tm)
		}
	}
	c.notifyLocked()
}

// Advance moves the clock on by d and fires the timers that are due.
func (c *Fake) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Wait blocks until ok(number of pending timers) holds, or ctx ends.
func (c *Fake) Wait(ctx context.Context, ok func(pending int) bool) error {
	for {
		c.mu.Lock()
		n, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if ok(n) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// WaitTimers fails t unless exactly n timers are pending within 20 s.
func (c *Fake) WaitTimers(t testing.TB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := 0
	if err := c.Wait(ctx, func(pending int) bool { got = pending; return pending == n }); err != nil {
		t.Fatalf("waiting for %d pending timers, have %d", n, got)
	}
}

// WaitDeadline fails t unless, within 20 s, exactly one timer is pending and it is due at at:
// the code under test has set the timer a test expects, and no other.
func (c *Fake) WaitDeadline(t testing.TB, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var due []time.Time
	for {
		c.mu.Lock()
		due = due[:0]
		for tm := range c.timers {
			due = append(due, tm.at)
		}
		ch := c.changed
		c.mu.Unlock()
		if len(due) == 1 && due[0].Equal(at) {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for one timer due at %v, have %d due at %v", at, len(due), due)
		}
	}
}
