package clock

import (
	"testing"
	"time"
)

func TestRealTimer(t *testing.T) {
	start := Real.Now()
	tm := Real.NewTimer(time.Millisecond)
	got := <-tm.C()
	if got.Before(start) {
		t.Errorf("timer fired at %v, before %v", got, start)
	}
	if tm.Stop() {
		t.Error("Stop after firing reported an active timer")
	}
	if !Real.NewTimer(time.Hour).Stop() {
		t.Error("Stop of a pending timer reported it inactive")
	}
}
