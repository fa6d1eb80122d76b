package lazydesc

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// embeddedSets are the descriptor sets the binary embeds and builds with this package: meshapi's
// two, cache's Wasm filters and bootstrap/envoyproto's.
var embeddedSets = []string{
	"../../meshconfig/meshapi/mesh.pb.gz",
	"../../meshconfig/meshapi/proxy.pb.gz",
	"../../cache/wasm.pb.gz",
	"../../bootstrap/envoyproto/envoy.pb.gz",
}

// TestEmbeddedSetsListed: every descriptor set in the module (*.pb.gz) is in embeddedSets, so
// that TestBuildMatchesProtodesc checks each one the binary builds.
func TestEmbeddedSetsListed(t *testing.T) {
	var found []string
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".pb.gz") {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range found {
		if !slices.Contains(embeddedSets, p) {
			t.Errorf("%s is not in embeddedSets", p)
		}
	}
	if len(found) != len(embeddedSets) {
		t.Errorf("found %v, embeddedSets lists %v", found, embeddedSets)
	}
}

// TestBuildMatchesProtodesc: for every embedded set, each file built here describes exactly the
// FileDescriptorProto it was built from (protodesc, the reference, converts it back), every type,
// import and extended message it names resolves inside the set (no placeholder), and protodesc
// accepts the same set.
func TestBuildMatchesProtodesc(t *testing.T) {
	for _, path := range embeddedSets {
		t.Run(path, func(t *testing.T) {
			gz, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			set := decodeSet(t, gz)
			if _, err := protodesc.NewFiles(set); err != nil {
				t.Fatalf("protodesc refuses the set: %v", err)
			}
			files, err := Build(gz)
			if err != nil {
				t.Fatal(err)
			}
			if files.NumFiles() != len(set.File) {
				t.Fatalf("%d files built, the set has %d", files.NumFiles(), len(set.File))
			}
			for _, want := range set.File {
				fd, err := files.FindFileByPath(want.GetName())
				if err != nil {
					t.Fatal(err)
				}
				if got := protodesc.ToFileDescriptorProto(fd); !proto.Equal(got, want) {
					t.Errorf("%s: built descriptor differs from the set's", want.GetName())
				}
				checkResolved(t, fd)
			}
		})
	}
}

// TestBuildOrdersByImports: a set listing files before what they import (and an extension before
// the message it extends) builds with every reference resolved.
func TestBuildOrdersByImports(t *testing.T) {
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range []protoreflect.FileDescriptor{
		(&structpb.Struct{}).ProtoReflect().Descriptor().ParentFile(),
		(&durationpb.Duration{}).ProtoReflect().Descriptor().ParentFile(),
	} {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	set.File = append([]*descriptorpb.FileDescriptorProto{{
		Name:       proto.String("test/ext.proto"),
		Package:    proto.String("test"),
		Dependency: []string{"google/protobuf/duration.proto", "google/protobuf/descriptor.proto"},
		Syntax:     proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("M"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name: proto.String("d"), Number: proto.Int32(1), JsonName: proto.String("d"),
				Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
				Type:     descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(),
				TypeName: proto.String(".google.protobuf.Duration"),
			}},
		}},
		Extension: []*descriptorpb.FieldDescriptorProto{{
			Name: proto.String("flag"), Number: proto.Int32(50000), JsonName: proto.String("flag"),
			Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:     descriptorpb.FieldDescriptorProto_TYPE_BOOL.Enum(),
			Extendee: proto.String(".google.protobuf.FieldOptions"),
		}},
	}}, set.File...)
	set.File = append(set.File, protodesc.ToFileDescriptorProto(descriptorpb.File_google_protobuf_descriptor_proto))

	files, err := Build(encodeSet(t, set))
	if err != nil {
		t.Fatal(err)
	}
	fd, err := files.FindFileByPath("test/ext.proto")
	if err != nil {
		t.Fatal(err)
	}
	checkResolved(t, fd)
	md, err := FindMessage(files, "test.M")
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Fields().ByName("d").Message(); got.IsPlaceholder() || got.FullName() != "google.protobuf.Duration" {
		t.Errorf("field d resolves to %v", got)
	}
	if _, err := FindMessage(files, "test.flag"); err == nil {
		t.Error("an extension found as a message")
	}
}

func TestBuildRefusesBadSets(t *testing.T) {
	file := func(name string, deps ...string) *descriptorpb.FileDescriptorProto {
		return &descriptorpb.FileDescriptorProto{Name: proto.String(name), Dependency: deps, Syntax: proto.String("proto3")}
	}
	set := func(fs ...*descriptorpb.FileDescriptorProto) []byte {
		return encodeSet(t, &descriptorpb.FileDescriptorSet{File: fs})
	}
	for name, tc := range map[string]struct {
		in   []byte
		want string
	}{
		"not gzip":       {[]byte("nope"), "decompress"},
		"truncated":      {gzipBytes(t, []byte{0x0a, 0x05, 0x0a, 0x01}), "unexpected EOF"},
		"bad tag":        {gzipBytes(t, []byte{0xff, 0xff, 0xff}), "descriptor set"},
		"empty":          {gzipBytes(t, nil), "empty descriptor set"},
		"unnamed file":   {set(&descriptorpb.FileDescriptorProto{Package: proto.String("p")}), "no name"},
		"missing import": {set(file("a.proto", "b.proto")), "a.proto imports b.proto, which the set lacks"},
		"cycle":          {set(file("a.proto", "b.proto"), file("b.proto", "a.proto")), "import cycle"},
		"twice":          {set(file("a.proto"), file("a.proto")), "a.proto appears twice"},
		"conflict": {set(
			&descriptorpb.FileDescriptorProto{Name: proto.String("a.proto"), Package: proto.String("p"),
				MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("M")}}},
			&descriptorpb.FileDescriptorProto{Name: proto.String("b.proto"), Package: proto.String("p"),
				MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("M")}}},
		), "b.proto"},
	} {
		_, err := Build(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

// TestSetHeldWeakly: a Set's descriptors are collected once nothing uses them, and while any is in
// use every lookup gives the same descriptors.
func TestSetHeldWeakly(t *testing.T) {
	gz, err := os.ReadFile("../../cache/wasm.pb.gz")
	if err != nil {
		t.Fatal(err)
	}
	s := NewSet("wasm descriptors", gz)
	if s.Held() {
		t.Fatal("built before first use")
	}
	const name = "envoy.extensions.filters.http.wasm.v3.Wasm"
	md, err := s.Message(name)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	again, err := s.Message(name)
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
		if collected = !s.Held(); collected {
			break
		}
	}
	if !collected {
		t.Fatal("descriptors still held after every user dropped them")
	}
	if _, err := s.Message(name); err != nil {
		t.Fatalf("rebuild after collection: %v", err)
	}
	if _, err := s.Message("no.such.Message"); err == nil || !strings.HasPrefix(err.Error(), "wasm descriptors: no.such.Message") {
		t.Errorf("unknown message: %v", err)
	}
	if _, err := NewSet("bad", []byte("x")).Files(); err == nil || !strings.HasPrefix(err.Error(), "bad: ") {
		t.Errorf("bad set: %v", err)
	}
}

// checkResolved fails for any import, field type or extendee of fd that did not resolve.
func checkResolved(t *testing.T, fd protoreflect.FileDescriptor) {
	t.Helper()
	for i := range fd.Imports().Len() {
		if imp := fd.Imports().Get(i); imp.IsPlaceholder() {
			t.Errorf("%s: import %s unresolved", fd.Path(), imp.Path())
		}
	}
	checkField := func(f protoreflect.FieldDescriptor) {
		if m := f.Message(); m != nil && m.IsPlaceholder() {
			t.Errorf("%s: type %s unresolved", f.FullName(), m.FullName())
		}
		if e := f.Enum(); e != nil && e.IsPlaceholder() {
			t.Errorf("%s: type %s unresolved", f.FullName(), e.FullName())
		}
		if f.IsExtension() && f.ContainingMessage().IsPlaceholder() {
			t.Errorf("%s: extends unresolved %s", f.FullName(), f.ContainingMessage().FullName())
		}
	}
	var walk func(ms protoreflect.MessageDescriptors, xs protoreflect.ExtensionDescriptors)
	walk = func(ms protoreflect.MessageDescriptors, xs protoreflect.ExtensionDescriptors) {
		for i := range xs.Len() {
			checkField(xs.Get(i))
		}
		for i := range ms.Len() {
			md := ms.Get(i)
			for j := range md.Fields().Len() {
				checkField(md.Fields().Get(j))
			}
			walk(md.Messages(), md.Extensions())
		}
	}
	walk(fd.Messages(), fd.Extensions())
}

func decodeSet(t *testing.T, gz []byte) *descriptorpb.FileDescriptorSet {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(raw, set); err != nil {
		t.Fatal(err)
	}
	return set
}

func encodeSet(t testing.TB, set *descriptorpb.FileDescriptorSet) []byte {
	t.Helper()
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return gzipBytes(t, raw)
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
