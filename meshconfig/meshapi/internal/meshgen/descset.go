package meshgen

import (
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/wingman-mesh/wingman/internal/descset"
)

// descriptorSet returns the gzip-compressed FileDescriptorSet that meshapi parses with: every
// top-level message and enum reachable from roots (a kept message keeps all its fields and nested
// declarations), in files of the same paths and packages as istio.io/api's, with options, comments,
// services and extensions stripped (protojson needs none of them) except map_entry and
// allow_alias, which change what a descriptor means. google/protobuf files are trimmed the same way.
func descriptorSet(roots ...protoreflect.MessageDescriptor) ([]byte, error) {
	keep := map[protoreflect.FullName]bool{} // top-level declarations kept
	var files []protoreflect.FileDescriptor
	var visit func(d protoreflect.Descriptor)
	visitMessage := func(md protoreflect.MessageDescriptor) {
		var walk func(md protoreflect.MessageDescriptor)
		walk = func(md protoreflect.MessageDescriptor) {
			for i := range md.Fields().Len() {
				fd := md.Fields().Get(i)
				if fd.Message() != nil {
					visit(fd.Message())
				}
				if fd.Enum() != nil {
					visit(fd.Enum())
				}
			}
			for i := range md.Messages().Len() {
				walk(md.Messages().Get(i))
			}
		}
		walk(md)
	}
	visit = func(d protoreflect.Descriptor) {
		top := d
		for {
			p, ok := top.Parent().(protoreflect.MessageDescriptor)
			if !ok {
				break
			}
			top = p
		}
		if keep[top.FullName()] {
			return
		}
		keep[top.FullName()] = true
		if !slices.Contains(files, top.ParentFile()) {
			files = append(files, top.ParentFile())
		}
		if md, ok := top.(protoreflect.MessageDescriptor); ok {
			visitMessage(md)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	slices.SortFunc(files, func(a, b protoreflect.FileDescriptor) int { return cmpString(a.Path(), b.Path()) })

	set := &descriptorpb.FileDescriptorSet{}
	for _, f := range files {
		full := protodesc.ToFileDescriptorProto(f)
		out := &descriptorpb.FileDescriptorProto{Name: full.Name, Package: full.Package, Syntax: full.Syntax}
		deps := map[string]bool{}
		for i, m := range full.MessageType {
			if !keep[f.Messages().Get(i).FullName()] {
				continue
			}
			stripMessage(m)
			out.MessageType = append(out.MessageType, m)
			collectDeps(f.Messages().Get(i), deps)
		}
		for i, e := range full.EnumType {
			if !keep[f.Enums().Get(i).FullName()] {
				continue
			}
			stripEnum(e)
			out.EnumType = append(out.EnumType, e)
		}
		delete(deps, f.Path())
		for p := range deps {
			out.Dependency = append(out.Dependency, p)
		}
		slices.Sort(out.Dependency)
		set.File = append(set.File, out)
	}
	// Files after their dependencies (stable: by path among equals). internal/lazydesc orders
	// what it builds itself; the order is kept so that the committed set does not change.
	set.File = topoSort(set.File)
	return descset.Encode(set)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func collectDeps(md protoreflect.MessageDescriptor, deps map[string]bool) {
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		if fd.Message() != nil {
			deps[fd.Message().ParentFile().Path()] = true
		}
		if fd.Enum() != nil {
			deps[fd.Enum().ParentFile().Path()] = true
		}
	}
	for i := range md.Messages().Len() {
		collectDeps(md.Messages().Get(i), deps)
	}
}

func stripMessage(m *descriptorpb.DescriptorProto) {
	mapEntry := m.GetOptions().GetMapEntry()
	m.Options = nil
	if mapEntry {
		m.Options = &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)}
	}
	m.Extension, m.ExtensionRange = nil, nil
	for _, f := range m.Field {
		f.Options = nil
	}
	for _, o := range m.OneofDecl {
		o.Options = nil
	}
	for _, n := range m.NestedType {
		stripMessage(n)
	}
	for _, e := range m.EnumType {
		stripEnum(e)
	}
}

func stripEnum(e *descriptorpb.EnumDescriptorProto) {
	alias := e.GetOptions().GetAllowAlias()
	e.Options = nil
	if alias {
		e.Options = &descriptorpb.EnumOptions{AllowAlias: proto.Bool(true)}
	}
	for _, v := range e.Value {
		v.Options = nil
	}
}

func topoSort(in []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
	byName := map[string]*descriptorpb.FileDescriptorProto{}
	for _, f := range in {
		byName[f.GetName()] = f
	}
	done := map[string]bool{}
	var out []*descriptorpb.FileDescriptorProto
	var add func(f *descriptorpb.FileDescriptorProto)
	add = func(f *descriptorpb.FileDescriptorProto) {
		if done[f.GetName()] {
			return
		}
		done[f.GetName()] = true
		for _, d := range f.Dependency {
			if dep, ok := byName[d]; ok {
				add(dep)
			}
		}
		out = append(out, f)
	}
	for _, f := range in {
		add(f)
	}
	return out
}
