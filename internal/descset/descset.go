// Package descset holds what the generators of Wingman's embedded descriptor sets share (go
// generate in bootstrap/envoyproto and cache): collecting files with their imports, and the
// deterministic, gzip-compressed serialization the packages embed. Only generators and tests link
// it; pilot-agent reads the embedded bytes with internal/lazydesc and never imports this package.
package descset

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Files is a set of file descriptors by path.
type Files map[string]protoreflect.FileDescriptor

// AddWithImports adds fd and, transitively, every file it imports.
func (s Files) AddWithImports(fd protoreflect.FileDescriptor) {
	if _, ok := s[fd.Path()]; ok {
		return
	}
	s[fd.Path()] = fd
	imports := fd.Imports()
	for i := range imports.Len() {
		s.AddWithImports(imports.Get(i).FileDescriptor)
	}
}

// Encode returns the files as a FileDescriptorSet sorted by path, serialized deterministically and
// gzip-compressed at the best compression, so regenerating gives the same bytes.
func (s Files) Encode() ([]byte, error) {
	paths := make([]string, 0, len(s))
	for p := range s {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	set := &descriptorpb.FileDescriptorSet{}
	for _, p := range paths {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(s[p]))
	}
	return Encode(set)
}

// Encode is set's deterministic wire form, gzip-compressed at the best compression: the form of
// every embedded descriptor set, so that a generator reproduces its file byte for byte.
func Encode(set *descriptorpb.FileDescriptorSet) ([]byte, error) {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("marshal descriptor set: %w", err)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Generate is a generator's main: it writes build's output to the file named by its one
// argument, and exits non-zero with the error otherwise.
func Generate(build func() ([]byte, error)) {
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: %s OUTPUT\n", os.Args[0])
		os.Exit(2)
	}
	b, err := build()
	if err == nil {
		err = os.WriteFile(os.Args[1], b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
