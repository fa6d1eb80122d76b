package cache

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"
)

//go:generate go run ./internal/wasmdesc/gendesc wasm.pb.gz

// wasmDescriptors is the gzip-compressed FileDescriptorSet of Envoy's HTTP and network Wasm
// filters (internal/wasmdesc). A Wasm filter that arrives as a TypedStruct (JSON-shaped) is
// converted through these dynamic types; the typed ones are read and rewritten on the wire, so
// the agent links no generated Envoy type.
//
//go:embed wasm.pb.gz
var wasmDescriptors []byte

type wasmTypes struct {
	types         *dynamicpb.Types
	http, network protoreflect.MessageDescriptor
}

var loadWasmTypes = sync.OnceValues(func() (*wasmTypes, error) {
	zr, err := gzip.NewReader(bytes.NewReader(wasmDescriptors))
	if err != nil {
		return nil, fmt.Errorf("wasm descriptors: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("wasm descriptors: %w", err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(raw, set); err != nil {
		return nil, fmt.Errorf("wasm descriptors: %w", err)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		return nil, fmt.Errorf("wasm descriptors: %w", err)
	}
	t := &wasmTypes{types: dynamicpb.NewTypes(files)}
	for name, dst := range map[string]*protoreflect.MessageDescriptor{
		"envoy.extensions.filters.http.wasm.v3.Wasm":    &t.http,
		"envoy.extensions.filters.network.wasm.v3.Wasm": &t.network,
	} {
		d, err := files.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			return nil, fmt.Errorf("wasm descriptors: %w", err)
		}
		md, ok := d.(protoreflect.MessageDescriptor)
		if !ok {
			return nil, fmt.Errorf("wasm descriptors: %s is not a message", name)
		}
		*dst = md
	}
	return t, nil
})

// structToWasm converts a TypedStruct's value (a google.protobuf.Struct, encoded) to the
// encoded Wasm filter, as Istio's StructToMessageSlow (JSON in between, strict).
func structToWasm(value []byte, network bool) ([]byte, error) {
	t, err := loadWasmTypes()
	if err != nil {
		return nil, err
	}
	st := &structpb.Struct{}
	if err := proto.Unmarshal(value, st); err != nil {
		return nil, err
	}
	js, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	md := t.http
	if network {
		md = t.network
	}
	m := dynamicpb.NewMessage(md)
	if err := (protojson.UnmarshalOptions{Resolver: t.types}).Unmarshal(js, m); err != nil {
		return nil, err
	}
	return proto.Marshal(m)
}
