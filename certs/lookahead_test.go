package certs

import (
	"testing"
	"time"
)

// TestLookAheadKeyNotAtStartup: after the first certificate the generator makes no second key
// until the clock reaches keyLookAhead of the rotation, and then makes it before the rotation.
func TestLookAheadKeyNotAtStartup(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.send("", ResourceDefault)
	c.mustRecv(ResourceDefault)
	if err := waitForWaiter(e.ctx, e.clock); err != nil { // rotate waits for the look-ahead time
		t.Fatal(err)
	}
	// An ECDSA key takes well under a millisecond here: had the generator gone on to the next
	// key at start-up (as it did), it would be waiting to be taken by now.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if e.m.keyReady.Load() {
			t.Fatal("the look-ahead key was made at start-up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	w := e.m.cur.Load()
	at := keyLookAhead(e.clock.Now(), w.rotateAt)
	if !at.Before(w.rotateAt) || w.rotateAt.Sub(at) > time.Minute {
		t.Fatalf("look-ahead at %v for a rotation at %v, want within the minute before", at, w.rotateAt)
	}
	e.clock.Set(at)
	for !e.m.keyReady.Load() {
		select {
		case <-e.ctx.Done():
			t.Fatal("no key made at the look-ahead time")
		case <-time.After(time.Millisecond):
		}
	}
	if got := e.m.cur.Load(); got != w {
		t.Fatal("the certificate rotated before its time")
	}
	e.rotate() // and the rotation takes that key
	c.mustRecv(ResourceDefault)
}
