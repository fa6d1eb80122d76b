package fastpath

import (
	"errors"
	"maps"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// effect is what applying delta responses in order does to a client's resources: per name, the
// encoded Resource it ends with, or "" when the name was removed. Within one response the
// updates apply before the removals (the order of xDS's delta protocol description).
type effect map[string]string

func resourceKeyOf(r *discovery.Resource) string {
	if r.GetName() != "" {
		return r.GetName()
	}
	return r.GetResourceName().GetName()
}

func (e effect) apply(t testing.TB, r *discovery.DeltaDiscoveryResponse) {
	for _, res := range r.Resources {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		e[resourceKeyOf(res)] = "+" + string(b)
	}
	for _, n := range r.RemovedResources {
		e[n] = ""
	}
	for _, rn := range r.RemovedResourceNames {
		e[rn.GetName()] = ""
	}
}

func deltaResp(nonce string, removed []string, res ...*discovery.Resource) *discovery.DeltaDiscoveryResponse {
	return &discovery.DeltaDiscoveryResponse{TypeUrl: ClusterType, SystemVersionInfo: "v-" + nonce, Nonce: nonce,
		Resources: res, RemovedResources: removed}
}

func res(name, version string) *discovery.Resource {
	return &discovery.Resource{Name: name, Version: version, Resource: &anypb.Any{TypeUrl: ClusterType, Value: []byte(name + version)}}
}

// checkMerge merges the two encoded responses and checks the result against applying them in
// turn. It returns false when the pair is not a case the merge takes (not valid protobuf, or a
// resource without a name).
func checkMerge(t *testing.T, a, b []byte, chunk int) bool {
	var older, newer discovery.DeltaDiscoveryResponse
	if proto.Unmarshal(a, &older) != nil || proto.Unmarshal(b, &newer) != nil {
		return false
	}
	var p Peeker
	out, err := p.MergeDeltaResponses(nil, split(a, chunk), split(b, chunk))
	if errors.Is(err, ErrUnnamedResource) {
		return false
	}
	if err != nil {
		t.Fatalf("both parse but the merge fails: %v", err)
	}
	var merged discovery.DeltaDiscoveryResponse
	if err := proto.Unmarshal(out, &merged); err != nil {
		t.Fatalf("merged message does not parse: %v", err)
	}
	if merged.Nonce != newer.Nonce || merged.SystemVersionInfo != newer.SystemVersionInfo || merged.TypeUrl != newer.TypeUrl {
		t.Fatalf("merged scalars %q %q %q, want newer's %q %q %q", merged.Nonce, merged.SystemVersionInfo, merged.TypeUrl,
			newer.Nonce, newer.SystemVersionInfo, newer.TypeUrl)
	}
	want, got := effect{}, effect{}
	want.apply(t, &older)
	want.apply(t, &newer)
	got.apply(t, &merged)
	if !maps.Equal(want, got) {
		t.Fatalf("merged effect %v, want %v", got, want)
	}
	if len(out) > len(a)+len(b) {
		t.Fatalf("merged %d bytes, more than the two responses (%d + %d)", len(out), len(a), len(b))
	}
	return true
}

func TestMergeDeltaResponses(t *testing.T) {
	cases := []struct {
		name         string
		older, newer *discovery.DeltaDiscoveryResponse
		resources    int
		removed      []string
	}{
		{"newer replaces, older-only kept", deltaResp("1", nil, res("a", "1"), res("b", "1")), deltaResp("2", nil, res("a", "2")), 2, nil},
		{"older removal kept", deltaResp("1", []string{"x"}, res("a", "1")), deltaResp("2", nil, res("a", "2")), 1, []string{"x"}},
		{"newer removes what older added", deltaResp("1", nil, res("a", "1"), res("b", "1")), deltaResp("2", []string{"b"}), 1, []string{"b"}},
		{"newer re-adds what older removed", deltaResp("1", []string{"a"}), deltaResp("2", nil, res("a", "2")), 1, nil},
		{"resource_name keys", deltaResp("1", nil, &discovery.Resource{ResourceName: &discovery.ResourceName{Name: "a"}, Version: "1"}),
			&discovery.DeltaDiscoveryResponse{Nonce: "2", RemovedResourceNames: []*discovery.ResourceName{{Name: "a"}}}, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := marshal(t, c.older), marshal(t, c.newer)
			for chunk := 1; chunk < 20; chunk += 6 {
				if !checkMerge(t, a, b, chunk) {
					t.Fatal("merge refused a valid pair")
				}
			}
			var p Peeker
			out, err := p.MergeDeltaResponses(nil, split(a, 7), split(b, 7))
			if err != nil {
				t.Fatal(err)
			}
			var m discovery.DeltaDiscoveryResponse
			if err := proto.Unmarshal(out, &m); err != nil {
				t.Fatal(err)
			}
			if len(m.Resources) != c.resources || len(m.RemovedResources) != len(c.removed) {
				t.Fatalf("merged %d resources, removed %v; want %d, %v", len(m.Resources), m.RemovedResources, c.resources, c.removed)
			}
		})
	}
	var p Peeker
	_, err := p.MergeDeltaResponses(nil, split(marshal(t, deltaResp("1", nil, &discovery.Resource{Version: "1"})), 4),
		split(marshal(t, deltaResp("2", nil, res("a", "2"))), 4))
	if !errors.Is(err, ErrUnnamedResource) {
		t.Fatalf("unnamed resource: got %v, want ErrUnnamedResource", err)
	}
}

// FuzzMergeDelta: for any two valid responses the merge either refuses an unnamed resource or
// yields a valid response with the same effect as the two in turn, never larger than both.
func FuzzMergeDelta(f *testing.F) {
	f.Add(marshal(f, deltaResp("1", []string{"x"}, res("a", "1"), res("b", "1"))), marshal(f, deltaResp("2", []string{"b"}, res("a", "2"))))
	f.Add(marshal(f, deltaResp("1", []string{"a"})), marshal(f, deltaResp("2", nil, res("a", "2"), res("c", "2"))))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		checkMerge(t, a, b, chunkOf(a)+chunkOf(b))
	})
}
