package meshapi

import (
	"runtime"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	_ "istio.io/api/mesh/v1alpha1" // registers istio.io/api's descriptors, the reference

	"github.com/wingman-mesh/wingman/internal/lazydesc"
)

// TestDescriptorsMatchIstio: every message and enum of the embedded set has the fields (name,
// number, kind, cardinality, JSON name, type, oneof) and values of istio.io/api's generated
// descriptor of the same name, so protojson reads and writes them alike.
func TestDescriptorsMatchIstio(t *testing.T) {
	for _, set := range []struct {
		name string
		set  *lazydesc.Set
		min  int // messages at least (the set is cut to what its root reaches)
	}{{"MeshConfig's", meshSet, 40}, {"ProxyConfig's", proxySet, 20}} {
		t.Run(set.name, func(t *testing.T) {
			files, err := set.set.Files()
			if err != nil {
				t.Fatal(err)
			}
			if n := checkFiles(t, files); n < set.min {
				t.Fatalf("only %d messages in the embedded set", n)
			}
		})
	}
	for _, name := range []protoreflect.FullName{ProxyConfigName, MeshConfigName} {
		if _, err := Descriptor(name); err != nil {
			t.Error(err)
		}
	}
}

// TestProxySetIsProxyConfigs: the ProxyConfig set has every type ProxyConfig reaches and not
// MeshConfig, and Descriptor takes each from the set it belongs to.
func TestProxySetIsProxyConfigs(t *testing.T) {
	pc, err := Descriptor(ProxyConfigName)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := Descriptor(MeshConfigName)
	if err != nil {
		t.Fatal(err)
	}
	if pc.ParentFile() == mc.Fields().ByName("default_config").Message().ParentFile() {
		t.Fatal("ProxyConfig came from the MeshConfig set: the start would build both")
	}
	files, err := proxySet.Files()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := files.FindDescriptorByName(MeshConfigName); err == nil {
		t.Fatal("MeshConfig in the ProxyConfig set: it should be ProxyConfig's closure alone")
	}
	seen := map[protoreflect.FullName]bool{}
	var reach func(md protoreflect.MessageDescriptor)
	reach = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		if md.ParentFile() != pc.ParentFile() && md.ParentFile().Package() != "google.protobuf" {
			if _, err := files.FindDescriptorByName(md.FullName()); err != nil {
				t.Errorf("%s (reached from ProxyConfig) not in the ProxyConfig set", md.FullName())
			}
		}
		for i := range md.Fields().Len() {
			if m := md.Fields().Get(i).Message(); m != nil {
				reach(m)
			}
		}
	}
	reach(pc)
	if len(seen) < 20 {
		t.Fatalf("only %d messages reached from ProxyConfig", len(seen))
	}
	runtime.KeepAlive(mc)
}

// checkFiles compares every message and enum of files with istio.io/api's and returns how many
// messages it saw.
func checkFiles(t *testing.T, files *protoregistry.Files) int {
	n := 0
	var checkMsg func(md protoreflect.MessageDescriptor)
	checkMsg = func(md protoreflect.MessageDescriptor) {
		n++
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(md.FullName())
		if err != nil {
			t.Errorf("%s: not in istio.io/api: %v", md.FullName(), err)
			return
		}
		ref := d.(protoreflect.MessageDescriptor)
		if md.Fields().Len() != ref.Fields().Len() || md.IsMapEntry() != ref.IsMapEntry() {
			t.Errorf("%s: %d fields, istio.io/api's %d", md.FullName(), md.Fields().Len(), ref.Fields().Len())
			return
		}
		for i := range md.Fields().Len() {
			a, b := md.Fields().Get(i), ref.Fields().Get(i)
			if a.Name() != b.Name() || a.Number() != b.Number() || a.Kind() != b.Kind() ||
				a.Cardinality() != b.Cardinality() || a.JSONName() != b.JSONName() || a.IsMap() != b.IsMap() ||
				typeName(a) != typeName(b) || oneofName(a) != oneofName(b) || a.HasPresence() != b.HasPresence() {
				t.Errorf("%s differs from istio.io/api's", a.FullName())
			}
		}
		for i := range md.Messages().Len() {
			checkMsg(md.Messages().Get(i))
		}
		for i := range md.Enums().Len() {
			checkEnum(t, md.Enums().Get(i))
		}
	}
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Messages().Len() {
			checkMsg(fd.Messages().Get(i))
		}
		for i := range fd.Enums().Len() {
			checkEnum(t, fd.Enums().Get(i))
		}
		return true
	})
	return n
}

func checkEnum(t *testing.T, ed protoreflect.EnumDescriptor) {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(ed.FullName())
	if err != nil {
		t.Errorf("%s: not in istio.io/api: %v", ed.FullName(), err)
		return
	}
	ref := d.(protoreflect.EnumDescriptor)
	if ed.Values().Len() != ref.Values().Len() {
		t.Errorf("%s: %d values, istio.io/api's %d", ed.FullName(), ed.Values().Len(), ref.Values().Len())
		return
	}
	for i := range ed.Values().Len() {
		if a, b := ed.Values().Get(i), ref.Values().Get(i); a.Name() != b.Name() || a.Number() != b.Number() {
			t.Errorf("%s differs from istio.io/api's", a.FullName())
		}
	}
}

func typeName(fd protoreflect.FieldDescriptor) protoreflect.FullName {
	switch {
	case fd.Message() != nil:
		return fd.Message().FullName()
	case fd.Enum() != nil:
		return fd.Enum().FullName()
	}
	return ""
}

func oneofName(fd protoreflect.FieldDescriptor) protoreflect.Name {
	if od := fd.ContainingOneof(); od != nil {
		return od.Name()
	}
	return ""
}

// TestDescriptorsHeldWeakly: the descriptors are collected once nothing uses them (they cost
// heap only at start-up), and while any is in use every lookup gives the same descriptors, so
// messages made at different times share them.
func TestDescriptorsHeldWeakly(t *testing.T) {
	md, err := Descriptor(ProxyConfigName)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	again, err := Descriptor(ProxyConfigName)
	if err != nil {
		t.Fatal(err)
	}
	if again != md {
		t.Fatal("a descriptor in use did not keep its registry: two registries at once")
	}
	runtime.KeepAlive(md)
	mc, err := Descriptor(MeshConfigName)
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(mc)
	md, again, mc = nil, nil, nil
	collected := false
	for range 10 { // a few cycles: the weak pointer is cleared once the registry is unreachable
		runtime.GC()
		if collected = !meshSet.Held() && !proxySet.Held(); collected {
			break
		}
	}
	if !collected {
		t.Fatal("descriptors still held after every user dropped them")
	}
	if _, err := Descriptor(MeshConfigName); err != nil {
		t.Fatalf("rebuild after collection: %v", err)
	}
}
