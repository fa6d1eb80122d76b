package clocktest

import (
	"context"
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	start := time.Unix(1e9, 0)
	c := NewFake(start)
	if tm := c.NewTimer(0); (<-tm.C()) != start {
		t.Fatal("a timer of 0 did not fire at once")
	}
	a, b := c.NewTimer(time.Second), c.NewTimer(time.Minute)
	c.WaitTimers(t, 2)
	c.Advance(time.Second)
	if got := <-a.C(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("fired at %v", got)
	}
	c.WaitTimers(t, 1)
	if !b.Stop() || b.Stop() {
		t.Fatal("Stop of a pending timer must report true once")
	}
	c.Set(start) // never backwards
	if !c.Now().Equal(start.Add(time.Second)) {
		t.Fatalf("clock went back to %v", c.Now())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Wait(ctx, func(n int) bool { return n > 0 }); err == nil {
		t.Fatal("Wait returned without a timer and with its context ended")
	}
}
