package laststate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wingman-mesh/wingman/fastpath"
)

// deltaState is what a client holds after applying Delta responses: resources by name (their
// wire bytes), the names removed last, and the last response's version and nonce.
type deltaState struct {
	res              map[string]string
	removed          []string
	version, nonce   string
	controlPlaneSeen bool
}

func stateOf(t *testing.T, b []byte) deltaState {
	t.Helper()
	var m discovery.DeltaDiscoveryResponse
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	s := deltaState{res: map[string]string{}, version: m.SystemVersionInfo, nonce: m.Nonce, controlPlaneSeen: m.ControlPlane != nil}
	for _, r := range m.Resources {
		rb, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		s.res[r.Name] = string(rb)
	}
	s.removed = slices.Sorted(slices.Values(m.RemovedResources))
	return s
}

// TestMergeDeltaFilesAsFastpath: the streamed merge of a Delta log has the effect of
// fastpath.MergeDeltaResponses applied left to right (the in-memory merge mux and earlier
// snapshots use): same resources (as bytes), same removals, the last response's version, nonce
// and control plane. The log updates, removes, re-adds and removes-then-re-adds names.
func TestMergeDeltaFilesAsFastpath(t *testing.T) {
	dir := t.TempDir()
	res := func(name, version string, size int) *discovery.Resource {
		a, _ := anypb.New(&cluster.Cluster{Name: name, AltStatName: version + string(make([]byte, size))})
		return &discovery.Resource{Name: name, Version: version, Resource: a}
	}
	log := []*discovery.DeltaDiscoveryResponse{
		{TypeUrl: fastpath.ClusterType, SystemVersionInfo: "1", Nonce: "n1",
			Resources: []*discovery.Resource{res("a", "1", 40<<10), res("b", "1", 10), res("c", "1", 10)}},
		{TypeUrl: fastpath.ClusterType, SystemVersionInfo: "2", Nonce: "n2",
			Resources: []*discovery.Resource{res("d", "2", 10), res("a", "2", 70<<10)}, RemovedResources: []string{"b", "x"}},
		{TypeUrl: fastpath.ClusterType, SystemVersionInfo: "3", Nonce: "n3", ControlPlane: &corePlane,
			Resources: []*discovery.Resource{res("b", "3", 10)}, RemovedResources: []string{"c", "d"}},
	}
	var files []string
	var raw [][]byte
	for i, m := range log {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		files, raw = append(files, f), append(raw, b)
	}
	var p fastpath.Peeker
	want := raw[0]
	for _, b := range raw[1:] {
		m, err := p.MergeDeltaResponses(nil, mem.BufferSlice{mem.SliceBuffer(want)}, mem.BufferSlice{mem.SliceBuffer(b)})
		if err != nil {
			t.Fatal(err)
		}
		want = m
	}
	out := filepath.Join(dir, "merged")
	size, err := mergeDeltaFiles(files, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil || int64(len(got)) != size {
		t.Fatalf("merged file: %d bytes, said %d: %v", len(got), size, err)
	}
	g, w := stateOf(t, got), stateOf(t, want)
	if g.version != "3" || g.nonce != "n3" || !g.controlPlaneSeen || !slices.Equal(g.removed, w.removed) || len(g.res) != len(w.res) {
		t.Fatalf("merged: version %s nonce %s control plane %v removed %v, %d resources; want 3 n3 true %v %d",
			g.version, g.nonce, g.controlPlaneSeen, g.removed, len(g.res), w.removed, len(w.res))
	}
	for name, b := range w.res {
		if g.res[name] != b {
			t.Fatalf("resource %s differs from the in-memory merge", name)
		}
	}
	if _, ok := g.res["a"]; !ok || len(g.res) != 2 {
		t.Fatalf("merged resources %v, want a (of 2) and b (of 3)", slices.Sorted(func(yield func(string) bool) {
			for n := range g.res {
				if !yield(n) {
					return
				}
			}
		}))
	}
}

// TestMergeDeltaFilesRefuses: what the streamed merge does not read is said so (the recorder
// then merges in memory), and a truncated spool is an error, never a short merge.
func TestMergeDeltaFilesRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	good, _ := proto.Marshal(&discovery.DeltaDiscoveryResponse{TypeUrl: fastpath.ClusterType, Nonce: "1",
		Resources: []*discovery.Resource{{Name: "a", Version: "1"}}})
	names, _ := proto.Marshal(&discovery.DeltaDiscoveryResponse{TypeUrl: fastpath.ClusterType, Nonce: "2",
		RemovedResourceNames: []*discovery.ResourceName{{Name: "a"}}})
	unnamed, _ := proto.Marshal(&discovery.DeltaDiscoveryResponse{TypeUrl: fastpath.ClusterType, Nonce: "3",
		Resources: []*discovery.Resource{{Version: "1"}}})
	for name, b := range map[string][]byte{"names": names, "unnamed": unnamed} {
		if _, err := mergeDeltaFiles([]string{write("good-"+name, good), write(name, b)}, filepath.Join(dir, "out-"+name), nil); err == nil || !isUnsupported(err) {
			t.Fatalf("%s: %v, want errMergeUnsupported", name, err)
		}
	}
	if _, err := mergeDeltaFiles([]string{write("good", good), write("cut", good[:len(good)-2])}, filepath.Join(dir, "out-cut"), nil); err == nil {
		t.Fatal("a truncated response was merged")
	}
}

func isUnsupported(err error) bool { return errors.Is(err, errMergeUnsupported) }

var corePlane = core.ControlPlane{Identifier: "istiod-1"}

// FuzzMergeDeltaFiles: spooled responses are Istiod's bytes. Whatever they hold, the streamed
// merge returns an error or a file of the size it says, never panics.
func FuzzMergeDeltaFiles(f *testing.F) {
	a, _ := proto.Marshal(&discovery.DeltaDiscoveryResponse{TypeUrl: fastpath.ClusterType, Nonce: "1", SystemVersionInfo: "v1",
		Resources: []*discovery.Resource{{Name: "a", Version: "1"}, {Name: "b", Version: "1"}}})
	b, _ := proto.Marshal(&discovery.DeltaDiscoveryResponse{TypeUrl: fastpath.ClusterType, Nonce: "2",
		Resources: []*discovery.Resource{{Name: "a", Version: "2"}}, RemovedResources: []string{"b"}})
	f.Add(a, b)
	f.Add(a[:len(a)-1], b)
	f.Add([]byte{0x12, 0x80}, []byte{})
	f.Fuzz(func(t *testing.T, x, y []byte) {
		dir := t.TempDir()
		var files []string
		for i, data := range [][]byte{x, y} {
			p := filepath.Join(dir, strconv.Itoa(i))
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			files = append(files, p)
		}
		out := filepath.Join(dir, "out")
		size, err := mergeDeltaFiles(files, out, nil)
		if err != nil {
			return
		}
		got, err := os.ReadFile(out)
		if err != nil || int64(len(got)) != size {
			t.Fatalf("merged %d bytes, said %d: %v", len(got), size, err)
		}
	})
}
