package mux

import (
	"slices"
	"sync"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/wingman-mesh/wingman/fastpath"
)

// TestStaleAnswer: the client answers, after the upstream stream was replaced, a response the
// earlier stream sent, before the new stream has carried one of its type. Expected values from
// Istio 1.30.3, once the replay has made the type watched: Delta (pilot/pkg/xds/delta.go
// shouldRespondDelta) ignores a nonce that is not the last one it sent as expired, and logs at
// error level a request without a nonce that changes no subscription ("Subscribed resources
// check mismatch"); state of the world (pkg/xds/server.go ShouldRespond) takes a request without
// a nonce for a new subscription and pushes the whole type again, and ignores an unknown nonce as
// expired. So a bare answer is not forwarded (it went without its nonce before: that error, or a
// second push), and one that changes the subscription goes without its nonce, its change kept.
//
// Istiod is held on the replay until the proxy has handled the answer (the next request read off
// Istiod's wire), so no response of the new stream can make the answer current; a later request
// (a Listener subscription) marks where the answer would have arrived, one stream being in order.
func TestStaleAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delta  bool
		change []string // names the answer subscribes besides answering
	}{
		{"delta/bare", true, nil},
		{"delta/with a subscription change", true, []string{"extra"}},
		{"sotw/bare", false, nil},
		{"sotw/with a subscription change", false, []string{"extra"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := newIstiod(t)
			_, sock := testProxy(t, i, nil)
			ctx := testCtx(t)
			i.caches[fastpath.ClusterType].SetResources(clusters(3, 3<<10, "v1"))
			c := newStaleClient(t, tc.delta, sock)

			replayed, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			var seen int
			hold := func(typeURL string, replay bool) {
				if typeURL == fastpath.ClusterType && replay {
					once.Do(func() { close(replayed); <-release })
				}
			}
			if tc.delta {
				gate := func(r *discovery.DeltaDiscoveryRequest) { hold(r.TypeUrl, len(r.InitialResourceVersions) > 0) }
				i.deltaGate.Store(&gate)
			} else {
				gate := func(r *discovery.DiscoveryRequest) { // the replay: the first Cluster request from now on
					if r.TypeUrl == fastpath.ClusterType {
						seen++
					}
					hold(r.TypeUrl, seen == 1)
				}
				i.sotwGate.Store(&gate)
			}
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
			// The next request read off Istiod's wire after the replay (the answer, if forwarded,
			// else the Listener subscription) shows the proxy has handled the answer.
			readBefore := i.read.Load()
			c.answer(t, tc.change)
			c.subscribeListeners(t)
			if err := i.waitRead(ctx, readBefore+1); err != nil {
				t.Fatal(err)
			}
			close(release)
			released = true
			if err := i.waitRequest(ctx, func(typeURL, _ string, _ bool, _ []string) bool { return typeURL == fastpath.ListenerType }); err != nil {
				t.Fatal(err)
			}

			got := false
			for _, r := range i.between(tc.delta) {
				switch {
				case r.nonce != "":
					t.Errorf("Istiod got the earlier stream's nonce %q", r.nonce)
				case tc.change != nil && slices.Equal(r.names, tc.change):
					got = true
				default:
					t.Errorf("Istiod got a request without a nonce that changes nothing: %+v", r)
				}
			}
			if want := tc.change != nil; got != want {
				t.Errorf("the answer reached Istiod: %v, want %v", got, want)
			}
			if t.Failed() {
				i.mu.Lock()
				for _, r := range i.requests {
					t.Logf("SotW request: %v", r)
				}
				for _, r := range i.deltas {
					t.Logf("Delta request: %v", r)
				}
				i.mu.Unlock()
				t.Logf("upstream connections accepted: %d", i.Accepted())
			}
			// The stream lives on: Istiod's answer to the replay reaches the client. (Not checked
			// for a SotW answer naming "extra": it narrows the wildcard Cluster subscription to a
			// name Istiod does not have, and go-control-plane may take it before answering the
			// replay, leaving nothing to send.)
			if tc.delta || tc.change == nil {
				c.recvClusters(t)
			}
		})
	}
}

// staleReq is what TestStaleAnswer reads of a request Istiod received.
type staleReq struct {
	nonce string
	names []string // SotW resource_names; Delta resource_names_subscribe
}

// between is what Istiod received of the Cluster type after the replay (the first Delta
// request with initial versions; the second SotW Cluster request) and before the first
// Listener request.
func (i *istiod) between(delta bool) []staleReq {
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []staleReq
	replay := false
	if delta {
		for _, r := range i.deltas {
			switch {
			case r.TypeUrl == fastpath.ListenerType:
				return out
			case replay && r.TypeUrl == fastpath.ClusterType:
				out = append(out, staleReq{r.ResponseNonce, r.ResourceNamesSubscribe})
			case len(r.InitialResourceVersions) > 0:
				replay = true
			}
		}
		return out
	}
	n := 0
	for _, r := range i.requests {
		switch {
		case r.TypeUrl == fastpath.ListenerType:
			return out
		case r.TypeUrl == fastpath.ClusterType && n >= 2:
			out = append(out, staleReq{r.ResponseNonce, r.ResourceNames})
		}
		if r.TypeUrl == fastpath.ClusterType {
			n++
		}
	}
	return out
}

// staleClient is a SotW or Delta ADS client of the proxy holding one Cluster response
// unanswered.
type staleClient struct {
	delta   bool
	sotw    discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	deltas  discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	nonce   string
	version string
}

func newStaleClient(t *testing.T, delta bool, sock string) *staleClient {
	t.Helper()
	ctx := testCtx(t)
	c := &staleClient{delta: delta}
	var err error
	if delta {
		if c.deltas, err = adsClient(t, sock).DeltaAggregatedResources(ctx); err == nil {
			t.Cleanup(func() { c.deltas.CloseSend() })
			err = c.deltas.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType})
		}
	} else {
		c.sotw = subscribeClusters(t, ctx, adsClient(t, sock))
	}
	if err != nil {
		t.Fatal(err)
	}
	c.recv(t)
	return c
}

// recvClusters receives until a Cluster response (a Listener one may come first).
func (c *staleClient) recvClusters(t *testing.T) {
	t.Helper()
	for range 3 {
		var typeURL string
		if c.delta {
			r, err := c.deltas.Recv()
			if err != nil {
				t.Fatal(err)
			}
			typeURL = r.TypeUrl
		} else {
			r, err := c.sotw.Recv()
			if err != nil {
				t.Fatal(err)
			}
			typeURL = r.TypeUrl
		}
		if typeURL == fastpath.ClusterType {
			return
		}
	}
	t.Fatal("no Cluster response after the restart")
}

func (c *staleClient) recv(t *testing.T) {
	t.Helper()
	if c.delta {
		r, err := c.deltas.Recv()
		if err != nil || r.TypeUrl != fastpath.ClusterType {
			t.Fatalf("Delta response %v, %v", r, err)
		}
		c.nonce = r.Nonce
		return
	}
	r, err := c.sotw.Recv()
	if err != nil || r.TypeUrl != fastpath.ClusterType {
		t.Fatalf("response %v, %v", r, err)
	}
	c.nonce, c.version = r.Nonce, r.VersionInfo
}

// answer ACKs the response received last, subscribing names besides.
func (c *staleClient) answer(t *testing.T, names []string) {
	t.Helper()
	var err error
	if c.delta {
		err = c.deltas.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: fastpath.ClusterType, ResponseNonce: c.nonce, ResourceNamesSubscribe: names})
	} else {
		err = c.sotw.Send(&discovery.DiscoveryRequest{TypeUrl: fastpath.ClusterType, VersionInfo: c.version, ResponseNonce: c.nonce, ResourceNames: names})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (c *staleClient) subscribeListeners(t *testing.T) {
	t.Helper()
	var err error
	if c.delta {
		err = c.deltas.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: fastpath.ListenerType})
	} else {
		err = c.sotw.Send(&discovery.DiscoveryRequest{TypeUrl: fastpath.ListenerType})
	}
	if err != nil {
		t.Fatal(err)
	}
}
