package meshapi

import (
	"runtime"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	_ "istio.io/api/mesh/v1alpha1" // registers istio.io/api's descriptors, the reference
)

// TestDescriptorsMatchIstio: every message and enum of the embedded set has the fields (name,
// number, kind, cardinality, JSON name, type, oneof) and values of istio.io/api's generated
// descriptor of the same name, so protojson reads and writes them alike.
func TestDescriptorsMatchIstio(t *testing.T) {
	files, err := loadFiles()
	if err != nil {
		t.Fatal(err)
	}
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
	if n < 40 {
		t.Fatalf("only %d messages in the embedded set", n)
	}
	for _, name := range []protoreflect.FullName{ProxyConfigName, MeshConfigName} {
		if _, err := Descriptor(name); err != nil {
			t.Error(err)
		}
	}
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
	md, again = nil, nil
	collected := false
	for range 10 { // a few cycles: the weak pointer is cleared once the registry is unreachable
		runtime.GC()
		if collected = !meshSet.Held(); collected {
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
