// Package wasmdesc builds, from go-control-plane's generated packages, the descriptor set that
// cache embeds: Envoy's HTTP and network Wasm filters and every file they import. Only the
// generator (go generate in cache) and cache's tests link it; pilot-agent does not
// (cmd/pilot-agent/link_test.go).
package wasmdesc

import (
	"bytes"
	"compress/gzip"
	"slices"

	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	netwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	_ "google.golang.org/protobuf/types/known/wrapperspb" // what Istio's plugin config Any holds
)

// Build returns the gzip-compressed, deterministically serialized FileDescriptorSet of the two
// Wasm filter files, wrappers.proto and their imports, sorted by path.
func Build() ([]byte, error) {
	seen := map[string]protoreflect.FileDescriptor{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if _, ok := seen[fd.Path()]; ok {
			return
		}
		seen[fd.Path()] = fd
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
	}
	add((&httpwasm.Wasm{}).ProtoReflect().Descriptor().ParentFile())
	add((&netwasm.Wasm{}).ProtoReflect().Descriptor().ParentFile())
	paths := make([]string, 0, len(seen))
	for p := range seen {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	set := &descriptorpb.FileDescriptorSet{}
	for _, p := range paths {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(seen[p]))
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		return nil, err
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
