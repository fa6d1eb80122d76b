package fastpath

import (
	"bytes"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestAppendResponseMatchesProto: responses framed from resource entries are what proto.Marshal
// (deterministic) writes for the same DiscoveryResponse, with and without version, nonce and
// resources, and a response built from nil is sized exactly.
func TestAppendResponseMatchesProto(t *testing.T) {
	det := proto.MarshalOptions{Deterministic: true}
	bodies := [][]byte{[]byte("a"), bytes.Repeat([]byte("b"), 300), {}}
	for _, tc := range []struct{ version, nonce string }{{"", ""}, {"v1", "7"}, {"2026-12-02T13:00:05Z/18446744073709551615", ""}} {
		for n := 0; n <= len(bodies); n++ {
			want := &discovery.DiscoveryResponse{VersionInfo: tc.version, TypeUrl: SecretType, Nonce: tc.nonce}
			var res [][]byte
			for _, b := range bodies[:n] {
				want.Resources = append(want.Resources, &anypb.Any{TypeUrl: SecretType, Value: b})
				r := AppendResource(nil, SecretType, b)
				if len(r) != ResourceSize(SecretType, len(b)) {
					t.Fatalf("ResourceSize %d, wrote %d", ResourceSize(SecretType, len(b)), len(r))
				}
				res = append(res, r)
			}
			w, err := det.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got := AppendResponse(nil, []byte(tc.version), SecretType, tc.nonce, res)
			if !bytes.Equal(got, w) {
				t.Errorf("%+v, %d resources: %x\nwant %x", tc, n, got, w)
			}
			if cap(got) != len(got) {
				t.Errorf("%+v, %d resources: cap %d, len %d", tc, n, cap(got), len(got))
			}
		}
	}
}

// TestWithNode: a request without a node gets the given one (and decodes with it); a request
// that has one is returned as it is.
func TestWithNode(t *testing.T) {
	node := marshal(t, &core.Node{Id: "sidecar~10.0.0.1~a.b~b.svc.cluster.local"})
	var p Peeker
	for _, delta := range []bool{false, true} {
		var bare, with []byte
		field := RequestNodeField
		if delta {
			field = DeltaRequestNodeField
			bare = marshal(t, &discovery.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResponseNonce: "1"})
			with = marshal(t, &discovery.DeltaDiscoveryRequest{TypeUrl: ClusterType, Node: &core.Node{Id: "own"}})
		} else {
			bare = marshal(t, &discovery.DiscoveryRequest{TypeUrl: ClusterType, ResponseNonce: "1"})
			with = marshal(t, &discovery.DiscoveryRequest{TypeUrl: ClusterType, Node: &core.Node{Id: "own"}})
		}
		f, err := p.WithNode(Frame{Data: split(bare, 3)}, field, node)
		if err != nil {
			t.Fatal(err)
		}
		out := f.Data.Materialize()
		f.Free()
		var id, nonce string
		if delta {
			var m discovery.DeltaDiscoveryRequest
			if err := proto.Unmarshal(out, &m); err != nil {
				t.Fatal(err)
			}
			id, nonce = m.GetNode().GetId(), m.ResponseNonce
		} else {
			var m discovery.DiscoveryRequest
			if err := proto.Unmarshal(out, &m); err != nil {
				t.Fatal(err)
			}
			id, nonce = m.GetNode().GetId(), m.ResponseNonce
		}
		if id != "sidecar~10.0.0.1~a.b~b.svc.cluster.local" || nonce != "1" {
			t.Errorf("delta %v: node %q nonce %q after WithNode", delta, id, nonce)
		}
		f, err = p.WithNode(FrameOf(with), field, node)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.Data.Materialize(), with) {
			t.Errorf("delta %v: a request with its own node was changed", delta)
		}
		f.Free()
	}
}
