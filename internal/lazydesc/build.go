package lazydesc

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/runtime/protoimpl"
)

// Field numbers of descriptor.proto read here (google/protobuf/descriptor.proto).
const (
	setFile        protowire.Number = 1 // FileDescriptorSet.file
	fileName       protowire.Number = 1 // FileDescriptorProto.name
	fileDependency protowire.Number = 3 // FileDescriptorProto.dependency
)

// rawFile is one FileDescriptorProto of a set, as wire bytes, with what ordering needs.
type rawFile struct {
	name string
	deps []string
	raw  []byte
}

// Build builds a registry of its own (nothing is registered globally) from a gzip-compressed
// FileDescriptorSet. Files are built after the files they import, whatever their order in the
// set, so that extensions find the messages they extend; a file importing one the set lacks, an
// import cycle or a file named twice is an error (as protodesc.NewFiles would refuse them).
//
// Each file is checked only as far as the builder reads it now (its top-level declarations); the
// rest is read on first use and the builder panics there on malformed bytes. Sets come from
// generators and are tested against the generated descriptors they were made from; a panic while
// building is returned as an error.
func Build(gz []byte) (*protoregistry.Files, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	files, err := splitSet(raw)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("empty descriptor set")
	}
	order, err := dependencyOrder(files)
	if err != nil {
		return nil, err
	}
	return buildInOrder(order)
}

func buildInOrder(order []*rawFile) (reg *protoregistry.Files, err error) {
	var current string
	defer func() {
		if r := recover(); r != nil {
			reg, err = nil, fmt.Errorf("%s: %v", current, r)
		}
	}()
	reg = new(protoregistry.Files)
	for _, f := range order {
		current = f.name
		protoimpl.DescBuilder{RawDescriptor: f.raw, FileRegistry: reg}.Build()
	}
	return reg, nil
}

// splitSet returns the files of an encoded FileDescriptorSet with their names and imports.
func splitSet(b []byte) ([]*rawFile, error) {
	var out []*rawFile
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("descriptor set: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num != setFile || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, fmt.Errorf("descriptor set: %w", protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, fmt.Errorf("descriptor set: file %d: %w", len(out), protowire.ParseError(n))
		}
		b = b[n:]
		f, err := readFile(v)
		if err != nil {
			return nil, fmt.Errorf("descriptor set: file %d: %w", len(out), err)
		}
		out = append(out, f)
	}
	return out, nil
}

// readFile reads a FileDescriptorProto's name and imports (its top level only).
func readFile(b []byte) (*rawFile, error) {
	f := &rawFile{raw: b}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if (num == fileName || num == fileDependency) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			if num == fileName {
				f.name = string(v)
			} else {
				f.deps = append(f.deps, string(v))
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	if f.name == "" {
		return nil, errors.New("no name")
	}
	return f, nil
}

// dependencyOrder orders files so that each comes after every file it imports, keeping the set's
// order otherwise.
func dependencyOrder(files []*rawFile) ([]*rawFile, error) {
	byName := make(map[string]*rawFile, len(files))
	for _, f := range files {
		if _, dup := byName[f.name]; dup {
			return nil, fmt.Errorf("descriptor set: %s appears twice", f.name)
		}
		byName[f.name] = f
	}
	const (
		visiting = 1
		done     = 2
	)
	state := make(map[string]int, len(files))
	out := make([]*rawFile, 0, len(files))
	var visit func(f *rawFile) error
	visit = func(f *rawFile) error {
		switch state[f.name] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("descriptor set: import cycle through %s", f.name)
		}
		state[f.name] = visiting
		for _, d := range f.deps {
			dep, ok := byName[d]
			if !ok {
				return fmt.Errorf("descriptor set: %s imports %s, which the set lacks", f.name, d)
			}
			if err := visit(dep); err != nil {
				return err
			}
		}
		state[f.name] = done
		out = append(out, f)
		return nil
	}
	for _, f := range files {
		if err := visit(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}
