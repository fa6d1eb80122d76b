package meshapi

import (
	_ "embed"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/wingman-mesh/wingman/internal/lazydesc"
)

// meshDescriptors is the gzip-compressed FileDescriptorSet of MeshConfig and ProxyConfig and what
// they reach, options and comments stripped (internal/meshgen says how).
//
//go:embed mesh.pb.gz
var meshDescriptors []byte

// Full names of the messages parsed from documents.
const (
	ProxyConfigName protoreflect.FullName = "istio.mesh.v1alpha1.ProxyConfig"
	MeshConfigName  protoreflect.FullName = "istio.mesh.v1alpha1.MeshConfig"
)

// meshSet holds the descriptors built from meshDescriptors (with protoimpl.DescBuilder: no
// descriptorpb, no protodesc) weakly: they are needed while the ProxyConfig is loaded and the
// bootstrap rendered, at start-up, and not while the agent idles, when they (~350 KB of heap once
// ProxyConfig and MeshConfig are fully built) are collected. internal/lazydesc says how.
var meshSet = lazydesc.NewSet("mesh descriptors", meshDescriptors)

// loadFiles returns the registry of the embedded descriptors, building it when none is alive.
func loadFiles() (*protoregistry.Files, error) { return meshSet.Files() }

// Descriptor returns the descriptor of the named message from the embedded set.
func Descriptor(name protoreflect.FullName) (protoreflect.MessageDescriptor, error) {
	return meshSet.Message(name)
}

// NewDynamic returns an empty dynamic message of the named type.
func NewDynamic(name protoreflect.FullName) (*dynamicpb.Message, error) {
	md, err := Descriptor(name)
	if err != nil {
		return nil, err
	}
	return dynamicpb.NewMessage(md), nil
}
