package envoyproto

import (
	_ "embed"
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/wingman-mesh/wingman/internal/lazydesc"
)

//go:generate go run ./internal/gendesc envoy.pb.gz

// envoyDescriptors is the gzip-compressed FileDescriptorSet of Envoy's bootstrap and the typed
// configs it must resolve (internal/descset says which). Embedding descriptors instead of linking
// go-control-plane's generated packages keeps ~2.6 MB out of pilot-agent; messages are dynamic.
//
//go:embed envoy.pb.gz
var envoyDescriptors []byte

// envoySet builds Envoy's descriptors on first use (with protoimpl.DescBuilder: no descriptorpb or
// protodesc in the binary) and holds them weakly: a bootstrap override merges once at start-up and
// `pilot-agent bootstrap --validate` runs once, and an agent that did either keeps none of the
// descriptors in its heap afterwards. internal/lazydesc says how.
var envoySet = lazydesc.NewSet("envoy descriptors", envoyDescriptors)

// bootstrapName is the full name of the bootstrap message.
const bootstrapName protoreflect.FullName = "envoy.config.bootstrap.v3.Bootstrap"

// registry is Envoy's protos as dynamic types, from one build of the descriptors.
type registry struct {
	files     *protoregistry.Files
	types     *dynamicpb.Types
	bootstrap protoreflect.MessageDescriptor
}

// loadRegistry returns the registry of the embedded descriptors, building them when none are alive.
func loadRegistry() (*registry, error) {
	files, err := envoySet.Files()
	if err != nil {
		return nil, err
	}
	return registryOf(files)
}

// newRegistry builds a registry of its own from a gzip-compressed FileDescriptorSet.
func newRegistry(gz []byte) (*registry, error) {
	files, err := lazydesc.Build(gz)
	if err != nil {
		return nil, fmt.Errorf("envoy descriptors: %w", err)
	}
	return registryOf(files)
}

func registryOf(files *protoregistry.Files) (*registry, error) {
	md, err := lazydesc.FindMessage(files, bootstrapName)
	if err != nil {
		return nil, fmt.Errorf("envoy descriptors: %w", err)
	}
	return &registry{files: files, types: dynamicpb.NewTypes(files), bootstrap: md}, nil
}

// newBootstrap returns an empty dynamic config.bootstrap.v3.Bootstrap.
func (r *registry) newBootstrap() *dynamicpb.Message { return dynamicpb.NewMessage(r.bootstrap) }
