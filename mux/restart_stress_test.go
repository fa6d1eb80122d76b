package mux

import (
	"bytes"
	"fmt"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/wingman-mesh/wingman/fastpath"
)

// TestRepeatedIstiodRestartsConverge restarts Istiod five times while the config keeps changing
// and a Delta client keeps ACKing, subscribing to more clusters by name as it goes. After every
// restart the client's one stream must converge on exactly what Istiod holds: nothing lost,
// nothing stale, no resource the client did not ask for.
func TestRepeatedIstiodRestartsConverge(t *testing.T) {
	i := newIstiod(t)
	_, sock := testProxy(t, i, nil)
	ctx := testCtx(t)
	stream, err := adsClient(t, sock).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	all := clusters(60, 60<<10, "v0")
	names := func(upTo int) []string {
		var out []string
		for k := range upTo {
			out = append(out, fmt.Sprintf("outbound|80||svc-%04d.ns.svc.cluster.local", k))
		}
		return out
	}
	subscribed := 10
	if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType,
		ResourceNamesSubscribe: names(subscribed)}); err != nil {
		t.Fatal(err)
	}
	i.caches[fastpath.ClusterType].SetResources(all)
	state := map[string][]byte{}
	want := func() map[string]types.Resource {
		w := map[string]types.Resource{}
		for _, n := range names(subscribed) {
			w[n] = all[n]
		}
		return w
	}
	converged := func() bool {
		w := want()
		if len(state) != len(w) {
			return false
		}
		for n, r := range w {
			if !bytes.Equal(state[n], wantBytes(t, r)) {
				return false
			}
		}
		return true
	}
	recvUntilConverged := func(round int) {
		for !converged() {
			r, err := stream.Recv()
			if err != nil {
				t.Fatalf("round %d: the client's stream broke: %v", round, err)
			}
			for _, res := range r.Resources {
				state[res.Name] = res.Resource.Value
			}
			for _, n := range r.RemovedResources {
				delete(state, n)
			}
			if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: fastpath.ClusterType, ResponseNonce: r.Nonce}); err != nil {
				t.Fatal(err)
			}
		}
	}
	recvUntilConverged(0)
	for round := 1; round <= 5; round++ {
		i.stop()
		// While Istiod is down: the config changes and the client asks for more clusters.
		all = clusters(60, 60<<10, fmt.Sprint("v", round))
		i.caches[fastpath.ClusterType].SetResources(all)
		subscribed += 10
		if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: fastpath.ClusterType,
			ResourceNamesSubscribe: names(subscribed)[subscribed-10:]}); err != nil {
			t.Fatal(err)
		}
		i.start()
		recvUntilConverged(round)
	}
	if n := i.Accepted(); n != 6 {
		t.Fatalf("%d upstream connections for 6 Istiod lifetimes", n)
	}
}
