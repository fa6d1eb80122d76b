package envoyproto

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

//go:generate go run ./internal/gendesc envoy.pb.gz

// envoyDescriptors is the gzip-compressed FileDescriptorSet of Envoy's bootstrap and the typed
// configs it must resolve (internal/descset says which). Embedding descriptors instead of linking
// go-control-plane's generated packages keeps ~2.6 MB out of pilot-agent; messages are dynamic.
//
//go:embed envoy.pb.gz
var envoyDescriptors []byte

// registry is Envoy's protos as dynamic types, built once on first use. Immutable after build.
type registry struct {
	files     *protoregistry.Files
	types     *dynamicpb.Types
	bootstrap protoreflect.MessageDescriptor
}

var loadRegistry = sync.OnceValues(func() (*registry, error) { return newRegistry(envoyDescriptors) })

// newRegistry parses a gzip-compressed FileDescriptorSet.
func newRegistry(gz []byte) (*registry, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("envoy descriptors: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("envoy descriptors: %w", err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(raw, set); err != nil {
		return nil, fmt.Errorf("envoy descriptors: %w", err)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		return nil, fmt.Errorf("envoy descriptors: %w", err)
	}
	d, err := files.FindDescriptorByName("envoy.config.bootstrap.v3.Bootstrap")
	if err != nil {
		return nil, fmt.Errorf("envoy descriptors: %w", err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("envoy descriptors: envoy.config.bootstrap.v3.Bootstrap is not a message")
	}
	return &registry{files: files, types: dynamicpb.NewTypes(files), bootstrap: md}, nil
}

// newBootstrap returns an empty dynamic config.bootstrap.v3.Bootstrap.
func (r *registry) newBootstrap() *dynamicpb.Message { return dynamicpb.NewMessage(r.bootstrap) }
