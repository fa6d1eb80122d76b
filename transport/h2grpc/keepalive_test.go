package h2grpc

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/internal/clock/clocktest"
)

// TestPingerCountsIdleFromTheLastFrame: a frame that arrives part-way through the idle period
// moves the next ping to idle after that frame, not to a whole idle period after the timer
// noticed it, so a vanished peer is found idle + timeout after its last frame, as with grpc-go.
// (The timer used to restart a full period on seeing activity: up to 2 × idle + timeout.) An
// answered ping puts the next one idle after the answer. The clock is fake: the test moves it
// and waits for the pinger's timers and pings, so the figures are exact.
func TestPingerCountsIdleFromTheLastFrame(t *testing.T) {
	const idle, timeout = 10 * time.Second, time.Second
	base := time.Unix(1_000_000, 0)
	clk := clocktest.NewFake(base)
	var lastRead atomic.Int64
	frame := func() { lastRead.Store(int64(clk.Now().Sub(base))) }
	done := make(chan struct{})
	ack := make(chan struct{}, 1)
	pinged := make(chan time.Duration, 1)
	expired := make(chan time.Duration, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		pinger{clk: clk, base: base, idle: idle, timeout: timeout, done: done, lastRead: &lastRead, ack: ack,
			ping:   func() error { pinged <- clk.Now().Sub(base); return nil },
			expire: func() { expired <- clk.Now().Sub(base); close(done) }}.run()
	}()
	awaitPing := func(want time.Duration) {
		t.Helper()
		select {
		case at := <-pinged:
			if at != want {
				t.Fatalf("pinged at %v, want %v", at, want)
			}
		case <-time.After(20 * time.Second): // a bound for failing, not a measurement
			t.Fatalf("no ping by %v (clock at %v)", want, clk.Now().Sub(base))
		}
	}

	at := func(d time.Duration) time.Time { return base.Add(d) }
	clk.WaitDeadline(t, at(idle)) // idle after the start
	clk.Advance(2 * time.Second)
	frame() // a frame at 2 s
	clk.Advance(idle - 2*time.Second)
	// The pinger looked at 10 s and saw the frame: its next look is idle after the frame.
	clk.WaitDeadline(t, at(2*time.Second+idle))
	clk.Advance(2 * time.Second)
	awaitPing(2*time.Second + idle)

	// Answered: the answer is a frame, and the next ping is idle after it.
	clk.WaitDeadline(t, at(2*time.Second+idle+timeout)) // the answer's timeout
	clk.Advance(timeout / 2)
	frame()
	ack <- struct{}{}
	answeredAt := clk.Now().Sub(base)
	clk.WaitDeadline(t, at(answeredAt+idle))
	clk.Advance(idle)
	awaitPing(answeredAt + idle)

	// Not answered: the connection ends timeout after the ping, idle + timeout after the answer,
	// the last frame the peer sent.
	clk.WaitDeadline(t, at(answeredAt+idle+timeout))
	clk.Advance(timeout)
	select {
	case at := <-expired:
		if want := answeredAt + idle + timeout; at != want {
			t.Fatalf("found dead at %v, want %v (idle + timeout after the last frame at %v)", at, want, answeredAt)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an unanswered ping did not end the connection")
	}
	<-finished
}
