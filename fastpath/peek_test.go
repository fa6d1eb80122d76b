package fastpath

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// split cuts b into a BufferSlice of pieces of at most n bytes, so that readers must cross
// buffer boundaries.
func split(b []byte, n int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		s = append(s, mem.SliceBuffer(b[:k]))
		b = b[k:]
	}
	return s
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sampleResponse(n int) *discovery.DiscoveryResponse {
	r := &discovery.DiscoveryResponse{VersionInfo: "v42", TypeUrl: ClusterType, Nonce: "nonce-7"}
	for i := range n {
		r.Resources = append(r.Resources, &anypb.Any{TypeUrl: ClusterType, Value: bytes.Repeat([]byte{byte(i)}, 100+i)})
	}
	return r
}

func TestPeekResponseAcrossBuffers(t *testing.T) {
	b := marshal(t, sampleResponse(50))
	var p Peeker
	for _, chunk := range []int{1, 2, 3, 7, 64, 1 << 20} {
		var r Response
		if err := p.PeekResponse(split(b, chunk), &r); err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		want := Response{TypeURL: ClusterType, Version: "v42", Nonce: "nonce-7", Resources: 50}
		if r != want {
			t.Fatalf("chunk %d: got %+v, want %+v", chunk, r, want)
		}
	}
}

func TestPeekRequest(t *testing.T) {
	node := &core.Node{Id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", Cluster: "a.ns"}
	req := &discovery.DiscoveryRequest{VersionInfo: "v1", Node: node, ResourceNames: []string{"a", "b"},
		TypeUrl: EndpointType, ResponseNonce: "n1", ErrorDetail: &status.Status{Code: 3, Message: "bad cluster"}}
	b := marshal(t, req)
	var p Peeker
	for _, chunk := range []int{1, 5, 1 << 20} {
		var r Request
		if err := p.PeekRequest(split(b, chunk), &r); err != nil {
			t.Fatal(err)
		}
		if r.TypeURL != EndpointType || r.Version != "v1" || r.Nonce != "n1" || r.Names != 2 || !r.HasError ||
			r.ErrorMsg != "bad cluster" || r.NodeID != node.Id {
			t.Fatalf("chunk %d: got %+v", chunk, r)
		}
		var back core.Node
		if err := proto.Unmarshal(r.Node, &back); err != nil || !proto.Equal(&back, node) {
			t.Fatalf("node bytes do not decode back: %v", err)
		}
	}
}

func TestPeekDelta(t *testing.T) {
	req := &discovery.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResourceNamesSubscribe: []string{"x", "y"},
		ResourceNamesUnsubscribe: []string{"z"}, ResponseNonce: "n9", InitialResourceVersions: map[string]string{"q": "1"}}
	var p Peeker
	var dr DeltaRequest
	var seen []string
	err := p.PeekDeltaRequest(split(marshal(t, req), 3), &dr, func(k NameKind, name []byte) {
		seen = append(seen, fmt.Sprintf("%d:%s", k, name))
	})
	if err != nil || dr.TypeURL != ClusterType || dr.Nonce != "n9" || dr.Subscribe != 2 || dr.Unsubscribe != 1 {
		t.Fatalf("got %+v err %v", dr, err)
	}
	if fmt.Sprint(seen) != "[1:x 1:y 2:z]" {
		t.Fatalf("names %v", seen)
	}

	resp := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: "s1", TypeUrl: ClusterType, Nonce: "n10",
		Resources: []*discovery.Resource{
			{Name: "x", Version: "v1", Resource: &anypb.Any{TypeUrl: ClusterType, Value: []byte("body-x")}},
			{Name: "y", Version: "v2", Resource: &anypb.Any{TypeUrl: ClusterType, Value: []byte("body-y")}},
		},
		RemovedResources: []string{"z"}}
	var r DeltaResponse
	seen = nil
	err = p.PeekDeltaResponse(split(marshal(t, resp), 2), &r, func(k NameKind, name, version []byte) {
		seen = append(seen, fmt.Sprintf("%d:%s@%s", k, name, version))
	})
	if err != nil || r.TypeURL != ClusterType || r.Nonce != "n10" || r.Version != "s1" || r.Resources != 2 || r.Removed != 1 {
		t.Fatalf("got %+v err %v", r, err)
	}
	if fmt.Sprint(seen) != "[3:x@v1 3:y@v2 4:z@]" {
		t.Fatalf("names %v", seen)
	}
	bodies, err := p.ResourceBodies(split(marshal(t, resp), 4), true)
	if err != nil || len(bodies) != 2 || string(bodies[0]) != "body-x" || string(bodies[1]) != "body-y" {
		t.Fatalf("bodies %q err %v", bodies, err)
	}
}

func TestBuildersRoundTrip(t *testing.T) {
	node := marshal(t, &core.Node{Id: "n"})
	b := AppendRequest(nil, NameTableType, "v3", "n3", node, []string{"a"}, &Status{Code: 13, Message: "boom"})
	var got discovery.DiscoveryRequest
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.TypeUrl != NameTableType || got.VersionInfo != "v3" || got.ResponseNonce != "n3" || got.Node.GetId() != "n" ||
		len(got.ResourceNames) != 1 || got.ErrorDetail.GetCode() != 13 || got.ErrorDetail.GetMessage() != "boom" {
		t.Fatalf("round trip: %v", &got)
	}
	versions := map[string][]byte{"c1": []byte("1"), "c2": []byte("22")}
	d := AppendDeltaRequest(nil, ClusterType, "", node, []string{"*", "c1"}, func(yield func(string, []byte) bool) {
		for k, v := range versions {
			if !yield(k, v) {
				return
			}
		}
	}, nil)
	var dgot discovery.DeltaDiscoveryRequest
	if err := proto.Unmarshal(d, &dgot); err != nil {
		t.Fatal(err)
	}
	if dgot.TypeUrl != ClusterType || len(dgot.ResourceNamesSubscribe) != 2 || dgot.InitialResourceVersions["c2"] != "22" ||
		dgot.InitialResourceVersions["c1"] != "1" || dgot.Node.GetId() != "n" {
		t.Fatalf("delta round trip: %v", &dgot)
	}
	// Strip node and nonce from a stored request.
	var p Peeker
	stripped, err := p.AppendWithout(nil, split(b, 3), func(f int) bool { return f == reqNode || f == reqNonce })
	if err != nil {
		t.Fatal(err)
	}
	got.Reset()
	if err := proto.Unmarshal(stripped, &got); err != nil || got.Node != nil || got.ResponseNonce != "" || got.VersionInfo != "v3" {
		t.Fatalf("stripped: %v %v", &got, err)
	}
}

// TestPeekAllocsFlat checks that reading a response allocates the same whatever the number of
// resources: only the version and nonce strings (the type URL is interned).
func TestPeekAllocsFlat(t *testing.T) {
	var p Peeker
	for _, n := range []int{1, 100, 2000} {
		b := split(marshal(t, sampleResponse(n)), 16<<10)
		var r Response
		allocs := testing.AllocsPerRun(50, func() {
			if err := p.PeekResponse(b, &r); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 2 {
			t.Fatalf("%d resources: %.0f allocs per peek, want <= 2 (version, nonce)", n, allocs)
		}
	}
}

func TestMalformed(t *testing.T) {
	good := marshal(t, sampleResponse(3))
	var p Peeker
	for cut := 1; cut < len(good); cut += 37 {
		var r Response
		// Cutting a message short must yield an error or a consistent prefix, never a panic.
		_ = p.PeekResponse(split(good[:cut], 5), &r)
	}
	bad := [][]byte{{0x00}, {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, {0x22, 0x05, 'a'}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}}
	for _, b := range bad {
		var r Response
		if err := p.PeekResponse(split(b, 1), &r); err == nil {
			t.Errorf("%x: no error", b)
		}
	}
	_ = rand.IntN
}
