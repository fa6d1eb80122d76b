package cache

import (
	_ "embed"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/wingman-mesh/wingman/internal/lazydesc"
)

//go:generate go run ./internal/wasmdesc/gendesc wasm.pb.gz

// wasmDescriptors is the gzip-compressed FileDescriptorSet of Envoy's HTTP and network Wasm
// filters (internal/wasmdesc). A Wasm filter that arrives as a TypedStruct (JSON-shaped) is
// converted through these dynamic types; the typed ones are read and rewritten on the wire, so
// the agent links no generated Envoy type.
//
//go:embed wasm.pb.gz
var wasmDescriptors []byte

// wasmSet builds the descriptors on the first TypedStruct conversion (with protoimpl.DescBuilder:
// no descriptorpb or protodesc in the binary) and holds them weakly: a conversion after they were
// collected builds them again (BenchmarkWasmDescriptors says what that costs), and an agent that
// never converts one, or converted one long ago, keeps none in its heap. internal/lazydesc says how.
var wasmSet = lazydesc.NewSet("wasm descriptors", wasmDescriptors)

// Full names of the two Wasm filters.
const (
	httpWasmName    protoreflect.FullName = "envoy.extensions.filters.http.wasm.v3.Wasm"
	networkWasmName protoreflect.FullName = "envoy.extensions.filters.network.wasm.v3.Wasm"
)

// wasmTypes is what a conversion needs from one registry of wasmSet.
type wasmTypes struct {
	types         *dynamicpb.Types
	http, network protoreflect.MessageDescriptor
}

func loadWasmTypes() (*wasmTypes, error) {
	files, err := wasmSet.Files()
	if err != nil {
		return nil, err
	}
	return newWasmTypes(files)
}

func newWasmTypes(files *protoregistry.Files) (*wasmTypes, error) {
	t := &wasmTypes{types: dynamicpb.NewTypes(files)}
	var err error
	if t.http, err = lazydesc.FindMessage(files, httpWasmName); err != nil {
		return nil, fmt.Errorf("wasm descriptors: %w", err)
	}
	if t.network, err = lazydesc.FindMessage(files, networkWasmName); err != nil {
		return nil, fmt.Errorf("wasm descriptors: %w", err)
	}
	return t, nil
}

// structToWasm converts a TypedStruct's value (a google.protobuf.Struct, encoded) to the
// encoded Wasm filter, as Istio's StructToMessageSlow (JSON in between, strict).
func structToWasm(value []byte, network bool) ([]byte, error) {
	t, err := loadWasmTypes()
	if err != nil {
		return nil, err
	}
	return t.structToWasm(value, network)
}

func (t *wasmTypes) structToWasm(value []byte, network bool) ([]byte, error) {
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
