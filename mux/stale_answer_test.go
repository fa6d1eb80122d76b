package mux

import (
	"slices"
	"sync"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/wingman-mesh/wingman/fastpath"
)

// TestStaleDeltaAnswer: the client answers, after the upstream stream was replaced, a Delta
// response the earlier stream sent. Expected values from Istio 1.30.3 pilot/pkg/xds/delta.go
// shouldRespondDelta, once the type is watched (the replay): a request whose nonce is not the
// last one sent is ignored as expired; one without a nonce is a spontaneous request, and one that
// changes no subscription is logged at error level ("Subscribed resources check mismatch").
// So a bare answer is not forwarded (forwarded without its nonce, as before, it was that error),
// and an answer that changes the subscription goes without its nonce, its change kept.
//
// Istiod is held on the replay until the client's requests have passed the proxy, so no
// response of the new stream can make the answer current; a later request (a Listener
// subscription) marks where the answer would have arrived, one stream being in order.
func TestStaleDeltaAnswer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		subscribe []string
		want      bool // the answer reaches Istiod, without its nonce
	}{
		{"bare", nil, false},
		{"with a subscription change", []string{"extra"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := newIstiod(t)
			_, sock := testProxy(t, i, nil)
			ctx := testCtx(t)
			i.caches[fastpath.ClusterType].SetResources(clusters(3, 3<<10, "v1"))
			stream, err := adsClient(t, sock).DeltaAggregatedResources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer stream.CloseSend()
			if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType}); err != nil {
				t.Fatal(err)
			}
			first, err := stream.Recv() // left unanswered across the restart
			if err != nil {
				t.Fatal(err)
			}

			replayed, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			gate := func(r *discovery.DeltaDiscoveryRequest) {
				if r.TypeUrl == fastpath.ClusterType && len(r.InitialResourceVersions) > 0 {
					once.Do(func() { close(replayed); <-release })
				}
			}
			i.deltaGate.Store(&gate)
			released := false
			defer func() {
				if !released {
					close(release)
				}
			}()
			i.stop()
			i.start()
			select {
			case <-replayed:
			case <-ctx.Done():
				t.Fatal("no replay reached Istiod")
			}
			if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: fastpath.ClusterType, ResponseNonce: first.Nonce,
				ResourceNamesSubscribe: tc.subscribe}); err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: fastpath.ListenerType}); err != nil {
				t.Fatal(err)
			}
			close(release)
			released = true
			if err := i.waitRequest(ctx, func(typeURL, _ string, _ bool, _ []string) bool { return typeURL == fastpath.ListenerType }); err != nil {
				t.Fatal(err)
			}

			i.mu.Lock()
			from := slices.IndexFunc(i.deltas, func(r *discovery.DeltaDiscoveryRequest) bool { return len(r.InitialResourceVersions) > 0 })
			to := slices.IndexFunc(i.deltas, func(r *discovery.DeltaDiscoveryRequest) bool { return r.TypeUrl == fastpath.ListenerType })
			between := slices.Clone(i.deltas[from+1 : to])
			i.mu.Unlock()
			got := false
			for _, r := range between {
				switch {
				case r.ResponseNonce != "":
					t.Errorf("Istiod got the earlier stream's nonce %q", r.ResponseNonce)
				case slices.Equal(r.ResourceNamesSubscribe, tc.subscribe) && tc.subscribe != nil:
					got = true
				default:
					t.Errorf("Istiod got a request that changes nothing: %v", r)
				}
			}
			if got != tc.want {
				t.Errorf("the answer reached Istiod: %v, want %v (requests after the replay: %v)", got, tc.want, between)
			}
			// The stream lives on: Istiod's answer to the replay reaches the client.
			if r, err := stream.Recv(); err != nil || r.TypeUrl != fastpath.ClusterType {
				t.Fatalf("after the restart: %v, %v", r, err)
			}
		})
	}
}
