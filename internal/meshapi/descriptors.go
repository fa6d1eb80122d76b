package meshapi

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"sync"
	"weak"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/runtime/protoimpl"
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

// registryCache holds the descriptors built from meshDescriptors weakly: they are needed while
// the ProxyConfig is loaded and the bootstrap rendered, at start-up, and not while the agent
// idles, when they (~350 KB of heap once ProxyConfig and MeshConfig are fully built) are
// collected. Every descriptor keeps its registry alive, so all descriptors in use at any time
// come from one registry and dynamic messages built at different times mix safely.
var registryCache struct {
	mu    sync.Mutex
	files weak.Pointer[protoregistry.Files] // guarded by mu
}

// loadFiles returns the registry of the embedded descriptors, building it when none is alive.
func loadFiles() (*protoregistry.Files, error) {
	registryCache.mu.Lock()
	defer registryCache.mu.Unlock()
	if f := registryCache.files.Value(); f != nil {
		return f, nil
	}
	f, err := buildFiles(meshDescriptors)
	if err != nil {
		return nil, err
	}
	registryCache.files = weak.Make(f)
	return f, nil
}

// buildFiles builds descriptors from a gzip-compressed FileDescriptorSet with protoimpl's
// DescBuilder, the builder protoc-gen-go's generated code uses for its raw descriptors, into a
// registry of its own (nothing is registered globally). Unlike protodesc it needs no
// descriptorpb (whose own descriptors, once built, stay in the heap for good: ~80 KB) and
// builds each file's fields lazily, on first use. It trusts its input, which is generated
// (TestDescriptorsMatchIstio checks it against istio.io/api's), and panics on a malformed one:
// that is turned into an error.
func buildFiles(gz []byte) (files *protoregistry.Files, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("mesh descriptors: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("mesh descriptors: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			files, err = nil, fmt.Errorf("mesh descriptors: %v", r)
		}
	}()
	files = new(protoregistry.Files)
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return nil, fmt.Errorf("mesh descriptors: %w", protowire.ParseError(n))
		}
		raw = raw[n:]
		if num == fileDescriptorSetFile && typ == protowire.BytesType {
			file, n := protowire.ConsumeBytes(raw)
			if n < 0 {
				return nil, fmt.Errorf("mesh descriptors: %w", protowire.ParseError(n))
			}
			protoimpl.DescBuilder{RawDescriptor: file, FileRegistry: files}.Build()
			raw = raw[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, raw)
		if n < 0 {
			return nil, fmt.Errorf("mesh descriptors: %w", protowire.ParseError(n))
		}
		raw = raw[n:]
	}
	return files, nil
}

// fileDescriptorSetFile is the number of google.protobuf.FileDescriptorSet's repeated file field.
const fileDescriptorSetFile = 1

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
