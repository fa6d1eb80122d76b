package mux

import "slices"

// While a client is slow, the Delta responses Istiod keeps sending are merged in the queue and
// never reach the client one by one, but each leaves a pendingDelta (its names and versions,
// awaiting the client's answer). Unfolded, up to maxPending of them would be kept per type: for
// full pushes of thousands of resources, many times one configuration's names. Beyond foldAt,
// the oldest two are folded into one that stands for both in turn, so the bookkeeping stays
// within a few configurations' names.
//
// A folded record answers to its own (the later) nonce: an ACK of it applies both. An ACK of a
// nonce folded into it is left to that later answer, and a NACK of one drops the record
// unapplied. Either way the proxy may only believe the client has less than it has (Istiod then
// resends, harmlessly), never more (Istiod would skip what the client lacks).
const (
	foldAt    = 4
	maxFolded = 64 // nonces remembered in one folded record
)

// foldPendingLocked folds the oldest pending records of t while there are more than foldAt.
func foldPendingLocked(t *typeState) {
	for len(t.pending) > foldAt {
		merged := foldDeltas(t.pending[0], t.pending[1])
		t.pending = slices.Delete(t.pending, 0, 1)
		t.pending[0] = merged
	}
}

// foldDeltas returns a new record with the effect of a and then b: b's names as b has them,
// a's others as a has them.
func foldDeltas(a, b *pendingDelta) *pendingDelta {
	out := &pendingDelta{nonce: b.nonce}
	out.folded = append(append(append(out.folded, a.folded...), a.nonce), b.folded...)
	if n := len(out.folded); n > maxFolded {
		out.folded = slices.Delete(out.folded, 0, n-maxFolded)
	}
	seen := make(map[string]struct{}, len(b.updated)/2+len(b.removed))
	for j := 0; j+1 < len(b.updated); j += 2 {
		name := b.bytes(b.updated[j])
		seen[string(name)] = struct{}{}
		out.updated = append(out.updated, out.add(name), out.add(b.bytes(b.updated[j+1])))
	}
	for _, sp := range b.removed {
		name := b.bytes(sp)
		seen[string(name)] = struct{}{}
		out.removed = append(out.removed, out.add(name))
	}
	for j := 0; j+1 < len(a.updated); j += 2 {
		name := a.bytes(a.updated[j])
		if _, ok := seen[string(name)]; !ok {
			out.updated = append(out.updated, out.add(name), out.add(a.bytes(a.updated[j+1])))
		}
	}
	for _, sp := range a.removed {
		name := a.bytes(sp)
		if _, ok := seen[string(name)]; !ok {
			out.removed = append(out.removed, out.add(name))
		}
	}
	return out
}
