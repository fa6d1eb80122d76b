package h2grpc

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestPingerCountsIdleFromTheLastFrame: a frame that arrives part-way through the idle period
// moves the next ping to idle after that frame, not to a whole idle period after the timer
// noticed it, so a vanished peer is found within idle + timeout of its last frame, as with
// grpc-go. (The timer used to restart a full period on seeing activity: up to 2 × idle + timeout.)
func TestPingerCountsIdleFromTheLastFrame(t *testing.T) {
	const idle, timeout = time.Second, 200 * time.Millisecond
	var lastRead atomic.Int64
	done := make(chan struct{})
	pinged := make(chan time.Time, 1)
	expired := make(chan time.Time, 1)
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		pinger{idle: idle, timeout: timeout, done: done, lastRead: &lastRead, ack: make(chan struct{}),
			ping:   func() error { pinged <- time.Now(); return nil },
			expire: func() { expired <- time.Now(); close(done) }}.run()
	}()
	// A frame half-way through the first idle period.
	time.Sleep(idle / 2)
	last := time.Now()
	lastRead.Store(last.UnixNano())
	var p, e time.Time
	select {
	case p = <-pinged:
	case <-time.After(10 * time.Second):
		t.Fatal("no ping within 10 s")
	}
	select {
	case e = <-expired:
	case <-time.After(10 * time.Second):
		t.Fatal("an unanswered ping did not end the connection within 10 s")
	}
	<-finished
	if p.Before(last.Add(idle)) {
		t.Errorf("pinged %v after the last frame, before idle (%v)", p.Sub(last), idle)
	}
	// The bound is the contract; the slack absorbs a loaded machine's timer latency.
	if bound := idle + timeout + 400*time.Millisecond; e.Sub(last) > bound {
		t.Errorf("found dead %v after the last frame (started %v before it), want ≤ idle + timeout (%v, with slack %v)",
			e.Sub(last), last.Sub(start), idle+timeout, bound)
	}
}
