package mux

import (
	"maps"
	"testing"

	"google.golang.org/protobuf/proto"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// TestDeltaReplayNamesWhatWasSent: a Delta replay claims the ACKed versions and, at an empty
// version, every name of a forwarded response not yet answered (updated or removed), so Istiod's
// first response on the new stream can remove what it dropped; without a wildcard subscription,
// only names still subscribed (Istiod adds initial_resource_versions' names to what it watches,
// pilot/pkg/xds/delta.go deltaWatchedResources at 1.30.3). Expected values follow from that rule.
func TestDeltaReplayNamesWhatWasSent(t *testing.T) {
	pending := func(nonce string, updated map[string]string, removed ...string) *pendingDelta {
		pd := &pendingDelta{nonce: nonce}
		for n, v := range updated {
			pd.updated = append(pd.updated, pd.add([]byte(n)), pd.add([]byte(v)))
		}
		for _, n := range removed {
			pd.removed = append(pd.removed, pd.add([]byte(n)))
		}
		return pd
	}
	for _, tc := range []struct {
		name     string
		wildcard bool
		subs     []string
		want     map[string]string
	}{
		{"wildcard", true, nil, map[string]string{"a": "1", "b": "", "c": "", "d": ""}},
		{"named", false, []string{"a", "b", "c"}, map[string]string{"a": "1", "b": "", "c": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := &typeState{wildcard: tc.wildcard, subs: map[string]struct{}{}, versions: map[string][]byte{"a": []byte("1"), "b": []byte("1")}}
			for _, n := range tc.subs {
				ts.subs[n] = struct{}{}
			}
			ts.pending = []*pendingDelta{pending("n1", map[string]string{"c": "2", "d": "2"}), pending("n2", nil, "b")}
			b, err := deltaProto{}.replayLocked(nil, "t", ts)
			if err != nil {
				t.Fatal(err)
			}
			var r discovery.DeltaDiscoveryRequest
			if err := proto.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(r.InitialResourceVersions, tc.want) {
				t.Fatalf("initial versions %v, want %v", r.InitialResourceVersions, tc.want)
			}
			ts.pending = nil // all answered: the ACKed versions alone
			b, _ = deltaProto{}.replayLocked(nil, "t", ts)
			r.Reset()
			if err := proto.Unmarshal(b, &r); err != nil || !maps.Equal(r.InitialResourceVersions, map[string]string{"a": "1", "b": "1"}) {
				t.Fatalf("initial versions %v (%v), want the ACKed ones", r.InitialResourceVersions, err)
			}
		})
	}
}
