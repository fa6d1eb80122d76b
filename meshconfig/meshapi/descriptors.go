package meshapi

import (
	_ "embed"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/wingman-mesh/wingman/internal/lazydesc"
)

// meshDescriptors is the gzip-compressed FileDescriptorSet of MeshConfig and ProxyConfig and what
// they reach, options and comments stripped (internal/meshgen says how).
//
//go:embed mesh.pb.gz
var meshDescriptors []byte

// proxyDescriptors is the same for ProxyConfig alone: about half of meshDescriptors (MeshConfig's
// own file is the other half), and all that a start without a mesh file parses with.
//
//go:embed proxy.pb.gz
var proxyDescriptors []byte

// Full names of the messages parsed from documents.
const (
	ProxyConfigName protoreflect.FullName = "istio.mesh.v1alpha1.ProxyConfig"
	MeshConfigName  protoreflect.FullName = "istio.mesh.v1alpha1.MeshConfig"
)

// meshSet and proxySet hold the descriptors built from the embedded sets (with
// protoimpl.DescBuilder: no descriptorpb, no protodesc) weakly: they are needed while the
// ProxyConfig is loaded and the bootstrap rendered, at start-up, and not while the agent idles, when
// they (~350 KB of heap once ProxyConfig and MeshConfig are fully built) are collected.
// internal/lazydesc says how.
//
// A ProxyConfig descriptor comes from proxySet and a MeshConfig one from meshSet, so the two are
// different descriptors of the same message: a mesh file's defaultConfig and a PROXY_CONFIG layer
// are never mixed in one message (a merge converts the config so far to the layer's descriptor).
var (
	meshSet  = lazydesc.NewSet("mesh descriptors", meshDescriptors)
	proxySet = lazydesc.NewSet("proxy config descriptors", proxyDescriptors)
)

// Descriptor returns the descriptor of the named message: MeshConfig's from the MeshConfig set,
// any other from the ProxyConfig set when it has it (ProxyConfig and every type it reaches).
func Descriptor(name protoreflect.FullName) (protoreflect.MessageDescriptor, error) {
	if name != MeshConfigName {
		files, err := proxySet.Files()
		if err != nil {
			return nil, err
		}
		if md, err := lazydesc.FindMessage(files, name); err == nil {
			return md, nil
		}
	}
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
