package fastpath

import (
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// chunkOf derives a buffer split size from the fuzz input so boundaries move around.
func chunkOf(b []byte) int {
	if len(b) == 0 {
		return 1
	}
	return int(b[0])%17 + 1
}

// FuzzPeekResponse checks that PeekResponse never panics, and that whenever the reference
// decoder accepts a DiscoveryResponse the peeked fields agree with it.
func FuzzPeekResponse(f *testing.F) {
	f.Add(marshal(f, sampleResponse(3)))
	f.Add([]byte{0x22, 0x03, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Peeker
		var r Response
		err := p.PeekResponse(split(b, chunkOf(b)), &r)
		var ref discovery.DiscoveryResponse
		if proto.Unmarshal(b, &ref) != nil {
			return
		}
		if err != nil {
			t.Fatalf("reference decoder accepts %x but peek fails: %v", b, err)
		}
		if r.TypeURL != ref.TypeUrl || r.Nonce != ref.Nonce || r.Version != ref.VersionInfo || r.Resources != len(ref.Resources) {
			t.Fatalf("peek %+v disagrees with reference %v", r, &ref)
		}
	})
}

// FuzzPeekRequest does the same for DiscoveryRequest (the one parser of it in the tree: the xDS
// proxy and the SDS server both read requests with it), and checks the stripping copy.
func FuzzPeekRequest(f *testing.F) {
	f.Add(marshal(f, &discovery.DiscoveryRequest{VersionInfo: "1", Node: &core.Node{Id: "x"}, TypeUrl: ListenerType,
		ResponseNonce: "n", ResourceNames: []string{"a"}, ErrorDetail: &status.Status{Code: 2, Message: "m"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Peeker
		var r Request
		var names []string
		err := p.PeekRequestNames(split(b, chunkOf(b)), &r, func(name []byte) { names = append(names, string(name)) })
		var ref discovery.DiscoveryRequest
		if proto.Unmarshal(b, &ref) != nil {
			return
		}
		if err != nil {
			t.Fatalf("reference decoder accepts %x but peek fails: %v", b, err)
		}
		if err := r.CheckUTF8(); err != nil {
			t.Fatalf("reference decoder accepts %x but CheckUTF8 refuses it: %v", b, err)
		}
		if r.TypeURL != ref.TypeUrl || r.Nonce != ref.ResponseNonce || r.Version != ref.VersionInfo ||
			r.Names != len(ref.ResourceNames) || !slices.Equal(names, ref.ResourceNames) || r.HasError != (ref.ErrorDetail != nil) || r.NodeID != ref.GetNode().GetId() ||
			r.ErrorMsg != ref.GetErrorDetail().GetMessage() {
			t.Fatalf("peek %+v disagrees with reference %v", r, &ref)
		}
		checkNode(t, r.Node, ref.GetNode())
		out, err := p.AppendWithout(nil, split(b, chunkOf(b)), func(f int) bool { return f == reqNonce })
		if err != nil {
			t.Fatalf("strip: %v", err)
		}
		var back discovery.DiscoveryRequest
		if err := proto.Unmarshal(out, &back); err != nil || back.ResponseNonce != "" || back.TypeUrl != ref.TypeUrl {
			t.Fatalf("stripped copy %x does not decode as expected: %v", out, err)
		}
	})
}

// FuzzPeekDelta covers both delta messages: the first byte picks which.
func FuzzPeekDelta(f *testing.F) {
	f.Add(append([]byte{0}, marshal(f, &discovery.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResourceNamesSubscribe: []string{"a"},
		ResourceNamesUnsubscribe: []string{"b"}, ResponseNonce: "n"})...))
	f.Add(append([]byte{1}, marshal(f, &discovery.DeltaDiscoveryResponse{TypeUrl: ClusterType, Nonce: "n", RemovedResources: []string{"r"},
		Resources: []*discovery.Resource{{Name: "a", Version: "1", Resource: &anypb.Any{Value: []byte("x")}}}})...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		b := in[1:]
		var p Peeker
		if in[0]%2 == 0 {
			var r DeltaRequest
			subs, unsubs := 0, 0
			err := p.PeekDeltaRequest(split(b, chunkOf(in)), &r, func(k NameKind, name []byte) {
				if k == Subscribe {
					subs++
				} else {
					unsubs++
				}
			})
			var ref discovery.DeltaDiscoveryRequest
			if proto.Unmarshal(b, &ref) != nil {
				return
			}
			if err != nil {
				t.Fatalf("reference accepts but peek fails: %v", err)
			}
			if r.TypeURL != ref.TypeUrl || r.Nonce != ref.ResponseNonce || subs != len(ref.ResourceNamesSubscribe) ||
				unsubs != len(ref.ResourceNamesUnsubscribe) || r.NodeID != ref.GetNode().GetId() ||
				r.HasError != (ref.ErrorDetail != nil) || r.ErrorMsg != ref.GetErrorDetail().GetMessage() {
				t.Fatalf("peek %+v disagrees with reference %v", r, &ref)
			}
			checkNode(t, r.Node, ref.GetNode())
			return
		}
		var r DeltaResponse
		names := 0
		err := p.PeekDeltaResponse(split(b, chunkOf(in)), &r, func(k NameKind, name, version []byte) { names++ })
		bodies, berr := p.ResourceBodies(split(b, chunkOf(in)), true)
		var ref discovery.DeltaDiscoveryResponse
		if proto.Unmarshal(b, &ref) != nil {
			return
		}
		if err != nil || berr != nil {
			t.Fatalf("reference accepts but peek fails: %v / %v", err, berr)
		}
		if r.TypeURL != ref.TypeUrl || r.Nonce != ref.Nonce || r.Resources != len(ref.Resources) || names != len(ref.Resources)+len(ref.RemovedResources) {
			t.Fatalf("peek %+v disagrees with reference %v", r, &ref)
		}
		withBody := 0
		for _, res := range ref.Resources {
			if res.Resource != nil {
				withBody++
			}
		}
		if len(bodies) != withBody {
			t.Fatalf("%d bodies, reference has %d", len(bodies), withBody)
		}
	})
}

// checkNode checks that the node bytes the peek kept decode as the reference's node (repeated
// occurrences merged), since the proxy replays exactly those bytes to Istiod.
func checkNode(t *testing.T, got []byte, want *core.Node) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("peek kept node bytes %x for a request without a node", got)
		}
		return
	}
	var n core.Node
	if err := proto.Unmarshal(got, &n); err != nil || !proto.Equal(&n, want) {
		t.Fatalf("peek's node %x decodes as %v (%v), reference %v", got, &n, err, want)
	}
}
