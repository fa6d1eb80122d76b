package mux

import (
	"fmt"
	"testing"
)

func pendingOf(nonce string, removed []string, updated ...string) *pendingDelta {
	pd := &pendingDelta{nonce: nonce}
	for i := 0; i+1 < len(updated); i += 2 {
		pd.updated = append(pd.updated, pd.add([]byte(updated[i])), pd.add([]byte(updated[i+1])))
	}
	for _, n := range removed {
		pd.removed = append(pd.removed, pd.add([]byte(n)))
	}
	return pd
}

// stalledType records responses 1..n as a stalled client would leave them: forwarded (or merged
// in the queue) and unanswered. Response 1 adds x, response 2 removes it; each sets a to its number.
func stalledType(n int) (*session, *typeState) {
	s := &session{}
	t := &typeState{versions: map[string][]byte{"x": []byte("0")}}
	for i := 1; i <= n; i++ {
		v := fmt.Sprint(i)
		var removed []string
		upd := []string{"a", v}
		switch i {
		case 1:
			upd = append(upd, "x", v)
		case 2:
			removed = []string{"x"}
		}
		deltaProto{}.recordResponseLocked(t, "", "", pendingOf("n"+v, removed, upd...))
	}
	return s, t
}

// TestPendingDeltasFold: a stalled client's unanswered responses fold into a bounded number of
// records, and answers to them never make the proxy believe the client holds more than it does.
func TestPendingDeltasFold(t *testing.T) {
	s, ts := stalledType(20)
	if len(ts.pending) > foldAt {
		t.Fatalf("%d pending records, want <= %d", len(ts.pending), foldAt)
	}
	// The client answers response 1 (on its way before the stall) late: folded, so not applied.
	ackLocked(s, ts, "n1", true)
	if string(ts.versions["a"]) != "" || string(ts.versions["x"]) != "0" {
		t.Fatalf("an ACK of a folded response applied it: %q", ts.versions)
	}
	// Then the newest (the merged one the client got after the stall): everything applies.
	ackLocked(s, ts, "n20", true)
	if string(ts.versions["a"]) != "20" || ts.versions["x"] != nil || len(ts.pending) != 0 {
		t.Fatalf("after the newest ACK: versions %q, %d pending", ts.versions, len(ts.pending))
	}

	s, ts = stalledType(20)
	ackLocked(s, ts, "n3", false) // a NACK of a folded response drops what it is folded into
	ackLocked(s, ts, "n20", true)
	if string(ts.versions["a"]) != "20" {
		t.Fatalf("a = %q, want 20", ts.versions["a"])
	}
	if _, ok := ts.versions["x"]; ok && string(ts.versions["x"]) != "0" {
		t.Fatalf("x = %q after a NACK of the records holding its removal", ts.versions["x"])
	}
}
