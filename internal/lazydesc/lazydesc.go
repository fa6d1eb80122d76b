// Package lazydesc builds protobuf descriptors from an embedded, gzip-compressed
// FileDescriptorSet without linking descriptorpb or protodesc, and holds them weakly.
//
// The builder is protoimpl.DescBuilder, the one protoc-gen-go's generated code uses for its raw
// descriptors: it reads each FileDescriptorProto's wire bytes directly and builds a file's fields,
// options and imports only when they are first used. protodesc.NewFiles would need the set
// unmarshalled into descriptorpb's messages first, and linking those two packages costs every
// start of the agent their init (~0.4 ms and ~230 KB of heap kept for good, measured with
// GODEBUG=inittrace=1) whether or not a descriptor is ever needed, and the binary ~385 KB.
//
// This use is outside protobuf-go's compatibility promise, which covers runtime/protoimpl only as
// far as generated code needs it. Generated code calls DescBuilder through protoimpl.TypeBuilder,
// with the declaration counts spelled out, Go types for every message, and the global registries;
// Build calls it alone, leaves the counts to the builder (documented on filedesc.Builder.Build)
// and gives it a FileRegistry of its own (a documented field generated code leaves nil). Exactly
// this call (RawDescriptor and a FileRegistry, no counts) is how protobuf-go itself loads the
// descriptors of APIv1 generated messages (internal/impl/legacy_file.go), which is some assurance
// it stays working, not a promise. Doing exactly what generated code does would mean generated
// Go types for every embedded message, registered globally for good. So the use is kept and
// gated instead: for every embedded set the tests compare each file, message, field, enum and
// option of the built registry with protodesc's build of the same bytes (the supported way) and
// round-trip a filled message of every type through both, binary and protojson; and
// TestProtobufGoVerified fails on any protobuf-go other than the version this was verified
// against, listing what to re-check before moving it.
//
// A Set's registry is built on first use and held weakly: the agent needs descriptors at start-up
// (ProxyConfig), for a bootstrap override, or for a rare ECDS conversion, and not while it idles,
// when the garbage collector frees them. Every descriptor keeps its registry alive (the builder
// keeps a reference to it), so while any descriptor or dynamic message of a Set is in use every
// lookup returns the same descriptors and dynamic messages made at different times mix safely.
package lazydesc

import (
	"fmt"
	"sync"
	"weak"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Set is an embedded descriptor set whose registry is built on first use and held weakly.
type Set struct {
	name string // names the set in errors, e.g. "envoy descriptors"
	gz   []byte

	mu    sync.Mutex
	files weak.Pointer[protoregistry.Files] // guarded by mu
}

// NewSet returns the Set of a gzip-compressed FileDescriptorSet; name prefixes its errors. Nothing
// is read until first use.
func NewSet(name string, gz []byte) *Set { return &Set{name: name, gz: gz} }

// Files returns the set's registry, building it when none is alive.
func (s *Set) Files() (*protoregistry.Files, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files.Value(); f != nil {
		return f, nil
	}
	f, err := Build(s.gz)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	s.files = weak.Make(f)
	return f, nil
}

// Held reports whether a registry of the set is alive (built and still in use, or not yet
// collected).
func (s *Set) Held() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files.Value() != nil
}

// Message returns the descriptor of the named message from the set.
func (s *Set) Message(name protoreflect.FullName) (protoreflect.MessageDescriptor, error) {
	files, err := s.Files()
	if err != nil {
		return nil, err
	}
	md, err := FindMessage(files, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return md, nil
}

// FindMessage returns the descriptor of the named message in files.
func FindMessage(files *protoregistry.Files, name protoreflect.FullName) (protoreflect.MessageDescriptor, error) {
	d, err := files.FindDescriptorByName(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a message", name)
	}
	return md, nil
}
