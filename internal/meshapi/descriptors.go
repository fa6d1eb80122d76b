package meshapi

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

// loadFiles parses the embedded set once, on first use (not at init: `pilot-agent version` and
// the other commands that read no ProxyConfig pay nothing).
var loadFiles = sync.OnceValues(func() (*protoregistry.Files, error) { return parseSet(meshDescriptors) })

func parseSet(gz []byte) (*protoregistry.Files, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("mesh descriptors: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("mesh descriptors: %w", err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(raw, set); err != nil {
		return nil, fmt.Errorf("mesh descriptors: %w", err)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		return nil, fmt.Errorf("mesh descriptors: %w", err)
	}
	return files, nil
}

// Descriptor returns the descriptor of the named message from the embedded set.
func Descriptor(name protoreflect.FullName) (protoreflect.MessageDescriptor, error) {
	files, err := loadFiles()
	if err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName(name)
	if err != nil {
		return nil, fmt.Errorf("mesh descriptors: %s: %w", name, err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("mesh descriptors: %s is not a message", name)
	}
	return md, nil
}

// NewDynamic returns an empty dynamic message of the named type.
func NewDynamic(name protoreflect.FullName) (*dynamicpb.Message, error) {
	md, err := Descriptor(name)
	if err != nil {
		return nil, err
	}
	return dynamicpb.NewMessage(md), nil
}
