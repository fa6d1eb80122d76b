package mux

import (
	"iter"
	"maps"
	"slices"

	"github.com/wingman-mesh/wingman/fastpath"
)

// deltaProto is the incremental (Delta) protocol. Stateless: all state is in the session.
type deltaProto struct{}

var _ protocol = deltaProto{}

// maxPending bounds the forwarded responses of one type awaiting the client's ACK; beyond it the
// oldest is forgotten (its versions are then only learnt again from later responses).
const maxPending = 64

func (deltaProto) delta() bool    { return true }
func (deltaProto) nodeField() int { return fastpath.DeltaRequestNodeField }

func (deltaProto) onRequestLocked(s *session, p *fastpath.Peeker, f fastpath.Frame) (fastpath.Frame, string, error) {
	var r fastpath.DeltaRequest
	// The type URL may come after the names on the wire: collect the name changes first.
	var subs, unsubs []string
	err := p.PeekDeltaRequest(f.Data, &r, func(k fastpath.NameKind, name []byte) {
		if k == fastpath.Subscribe {
			subs = append(subs, string(name))
		} else {
			unsubs = append(unsubs, string(name))
		}
	})
	if err != nil {
		f.Free()
		return fastpath.Frame{}, "", err
	}
	t := s.typeLocked(r.TypeURL)
	if t.subs == nil {
		t.subs = map[string]struct{}{}
		t.versions = map[string][]byte{}
		t.wildcard = len(subs) == 0 // an empty first request is the legacy wildcard
	}
	for _, n := range subs {
		if n == "*" {
			t.wildcard = true
			continue
		}
		t.subs[n] = struct{}{}
	}
	for _, n := range unsubs {
		if n == "*" {
			t.wildcard = false
			continue
		}
		delete(t.subs, n)
		delete(t.versions, n)
	}
	if r.Nonce != "" {
		ackLocked(s, t, r.Nonce, !r.HasError)
	}
	if r.Nonce != "" && t.nonceGen < s.gen && len(subs) == 0 && len(unsubs) == 0 {
		// The answer to a response an earlier upstream stream (or the restored state) sent, with
		// no subscription change: the replay already told Istiod what the client has, and Istiod
		// (pilot/pkg/xds/delta.go shouldRespondDelta, 1.30.3) would ignore it with its nonce as
		// expired, and log it at error level without one ("Subscribed resources check
		// mismatch": an empty nonce that changes nothing). Not forwarded.
		f.Free()
		return fastpath.Frame{}, r.TypeURL, nil
	}
	out, err := rewriteStaleNonce(s, p, t, f, r.Nonce, fastpath.DeltaRequestNonceField)
	return out, r.TypeURL, err
}

// ackLocked applies (accepted) or forgets the forwarded response with this nonce, and the
// earlier pending responses of the type with it: those were merged into it in the queue (the
// client never saw them alone), or were forwarded and left unanswered. Either way the client's
// answer to this nonce is its answer to them too, as it is to Istiod, which takes only the
// latest nonce it sent as an ACK (pilot/pkg/xds/delta.go, shouldRespondDelta: any other nonce
// is "expired" and ignored).
func ackLocked(s *session, t *typeState, nonce string, accepted bool) {
	idx := slices.IndexFunc(t.pending, func(pd *pendingDelta) bool { return pd.nonce == nonce })
	if idx < 0 {
		// An answer to a response folded into a later record (deltafold.go): an ACK is left to
		// the answer to that record; a NACK drops it unapplied.
		folded := slices.IndexFunc(t.pending, func(pd *pendingDelta) bool { return slices.Contains(pd.folded, nonce) })
		if folded >= 0 && !accepted {
			s.freePD = append(s.freePD, t.pending[:folded+1]...)
			t.pending = slices.Delete(t.pending, 0, folded+1)
		}
		return
	}
	for _, pd := range t.pending[:idx+1] {
		if accepted {
			for j := 0; j+1 < len(pd.updated); j += 2 {
				name, version := pd.bytes(pd.updated[j]), pd.bytes(pd.updated[j+1])
				if v, ok := t.versions[string(name)]; ok { // no allocation for a known name
					t.versions[string(name)] = append(v[:0], version...)
				} else {
					t.versions[string(name)] = slices.Clone(version)
				}
			}
			for _, sp := range pd.removed {
				delete(t.versions, string(pd.bytes(sp)))
			}
		}
		s.freePD = append(s.freePD, pd)
	}
	t.pending = slices.Delete(t.pending, 0, idx+1)
}

func (deltaProto) peekResponse(p *fastpath.Peeker, f fastpath.Frame, pd *pendingDelta) (string, string, string, error) {
	var r fastpath.DeltaResponse
	var visit func(fastpath.NameKind, []byte, []byte)
	if pd != nil {
		visit = pd.record
	}
	if err := p.PeekDeltaResponse(f.Data, &r, visit); err != nil {
		return "", "", "", err
	}
	if pd != nil {
		pd.nonce = r.Nonce
	}
	return r.TypeURL, r.Nonce, r.Version, nil
}

func (deltaProto) recordResponseLocked(t *typeState, _, _ string, pd *pendingDelta) {
	if pd == nil {
		return
	}
	if len(t.pending) >= maxPending {
		t.pending = slices.Delete(t.pending, 0, 1)
	}
	t.pending = append(t.pending, pd)
	foldPendingLocked(t)
}

func (deltaProto) subscribe(typeURL string) []byte {
	return fastpath.AppendDeltaRequest(nil, typeURL, "", nil, nil, nil, nil)
}

func (deltaProto) ack(typeURL, nonce, _ string, nack *fastpath.Status) []byte {
	// As Istio: Delta ACK and NACK carry the nonce only.
	return fastpath.AppendDeltaRequest(nil, typeURL, nonce, nil, nil, nil, nack)
}

func (deltaProto) rememberAckLocked(t *typeState, _, _ string) {
	if t.subs == nil {
		t.subs, t.versions, t.wildcard = map[string]struct{}{}, map[string][]byte{}, true
	}
}

// replayLocked re-subscribes the client's names (with "*" when it also holds a wildcard
// subscription) and tells Istiod which resources the client holds or may hold, so that only what
// changed is sent again and what Istiod no longer has is removed. That is what the client was
// sent, not only what it ACKed: a response forwarded (or restored, laststate.go) and not answered
// yet may reach the client, or be applied by it, after this replay, and a resource it carries
// that Istiod dropped meanwhile would otherwise stay at the client, as Istiod removes only names
// it knows the client has (initial_resource_versions join the watched names,
// pilot/pkg/xds/delta.go deltaWatchedResources at 1.30.3; a full push removes watched names it
// no longer generates). The names of unanswered responses go with an empty version: the proxy
// does not know whether the client applied them, so it never claims a version the client may
// lack (a server comparing versions resends them; Istio's compares none).
func (deltaProto) replayLocked(_ *fastpath.Peeker, typeURL string, t *typeState) ([]byte, error) {
	if t == nil || t.subs == nil {
		return nil, nil
	}
	if !t.wildcard && len(t.subs) == 0 {
		return nil, nil // the client unsubscribed everything: an empty request would mean wildcard
	}
	names := slices.Sorted(maps.Keys(t.subs))
	if t.wildcard && len(names) > 0 {
		names = append([]string{"*"}, names...)
	}
	var initial iter.Seq2[string, []byte]
	if !t.agent {
		initial = maps.All(t.versions)
		if len(t.pending) > 0 {
			initial = sentVersions(t)
		}
	}
	return fastpath.AppendDeltaRequest(nil, typeURL, "", nil, names, initial, nil), nil
}

// sentVersions is the versions the client ACKed, with every name of a response it was sent and
// has not answered (updated or removed) at an empty version; without a wildcard subscription
// only the names still subscribed (Istiod would take the others for subscriptions).
func sentVersions(t *typeState) iter.Seq2[string, []byte] {
	unsure := map[string]struct{}{}
	add := func(name []byte) {
		if !t.wildcard {
			if _, ok := t.subs[string(name)]; !ok {
				return
			}
		}
		unsure[string(name)] = struct{}{}
	}
	for _, pd := range t.pending {
		for j := 0; j+1 < len(pd.updated); j += 2 {
			add(pd.bytes(pd.updated[j]))
		}
		for _, sp := range pd.removed {
			add(pd.bytes(sp))
		}
	}
	return func(yield func(string, []byte) bool) {
		for name, v := range t.versions {
			if _, ok := unsure[name]; ok {
				continue
			}
			if !yield(name, v) {
				return
			}
		}
		for name := range unsure {
			if !yield(name, nil) {
				return
			}
		}
	}
}
