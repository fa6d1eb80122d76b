package meshgen

import (
	"bytes"
	"fmt"
	"go/format"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// wellKnown maps the google.protobuf messages ProxyConfig uses to the Go types protoc-gen-go
// gives them (and istio.io/api's structs hold): they stay the real generated types.
var wellKnown = map[protoreflect.FullName][2]string{
	"google.protobuf.Duration":    {"durationpb", "Duration"},
	"google.protobuf.BoolValue":   {"wrapperspb", "BoolValue"},
	"google.protobuf.Int32Value":  {"wrapperspb", "Int32Value"},
	"google.protobuf.Int64Value":  {"wrapperspb", "Int64Value"},
	"google.protobuf.UInt32Value": {"wrapperspb", "UInt32Value"},
	"google.protobuf.UInt64Value": {"wrapperspb", "UInt64Value"},
	"google.protobuf.DoubleValue": {"wrapperspb", "DoubleValue"},
	"google.protobuf.FloatValue":  {"wrapperspb", "FloatValue"},
	"google.protobuf.StringValue": {"wrapperspb", "StringValue"},
	"google.protobuf.Struct":      {"structpb", "Struct"},
	"google.protobuf.Value":       {"structpb", "Value"},
	"google.protobuf.ListValue":   {"structpb", "ListValue"},
}

var importPath = map[string]string{
	"durationpb": "google.golang.org/protobuf/types/known/durationpb",
	"wrapperspb": "google.golang.org/protobuf/types/known/wrapperspb",
	"structpb":   "google.golang.org/protobuf/types/known/structpb",
}

// closure is the messages and enums reachable from a root, excluding well-known types.
type closure struct {
	messages []protoreflect.MessageDescriptor
	enums    []protoreflect.EnumDescriptor
}

func closureOf(root protoreflect.MessageDescriptor) (*closure, error) {
	c := &closure{}
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor) error
	walk = func(md protoreflect.MessageDescriptor) error {
		if seen[md.FullName()] {
			return nil
		}
		seen[md.FullName()] = true
		if md.ParentFile().Package() == "google.protobuf" {
			if _, ok := wellKnown[md.FullName()]; !ok {
				return fmt.Errorf("%s: well-known type not mapped to Go", md.FullName())
			}
			return nil
		}
		if md.ParentFile().Syntax() != protoreflect.Proto3 {
			return fmt.Errorf("%s: only proto3 is supported", md.FullName())
		}
		c.messages = append(c.messages, md)
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			if fd.HasOptionalKeyword() || fd.Kind() == protoreflect.GroupKind {
				return fmt.Errorf("%s: proto3 optional fields and groups are not supported", fd.FullName())
			}
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			if ed := fd.Enum(); ed != nil && !seen[ed.FullName()] {
				seen[ed.FullName()] = true
				c.enums = append(c.enums, ed)
			}
			if fd.Message() != nil {
				if err := walk(fd.Message()); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	// Declaration order within each file, files by path: stable whatever the walk order.
	slices.SortFunc(c.messages, func(a, b protoreflect.MessageDescriptor) int { return cmpDecl(a, b) })
	slices.SortFunc(c.enums, func(a, b protoreflect.EnumDescriptor) int { return cmpDecl(a, b) })
	return c, nil
}

// cmpDecl orders by file path, then by the index path of the declaration in its file.
func cmpDecl(a, b protoreflect.Descriptor) int {
	if c := cmpString(a.ParentFile().Path(), b.ParentFile().Path()); c != 0 {
		return c
	}
	return slices.Compare(indexPath(a), indexPath(b))
}

func indexPath(d protoreflect.Descriptor) []int {
	var p []int
	for ; d != nil; d = d.Parent() {
		if _, ok := d.(protoreflect.FileDescriptor); ok {
			break
		}
		p = append([]int{d.Index()}, p...)
	}
	return p
}

// gen writes the Go source of one package.
type gen struct {
	buf     bytes.Buffer
	imports map[string]bool
	names   map[string]protoreflect.FullName // Go type name -> what declared it, to refuse clashes
	jsonOK  func(protoreflect.FullName) bool // whether istio.io/api's type has MarshalJSON
	copyOK  func(protoreflect.FullName) bool // whether istio.io/api's type has DeepCopy
}

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.buf, format+"\n", args...) }

func (g *gen) claim(name string, by protoreflect.FullName) error {
	if prev, ok := g.names[name]; ok {
		return fmt.Errorf("Go name %s of %s clashes with %s", name, by, prev)
	}
	g.names[name] = by
	return nil
}

// goType is the Go type of a field's value (of one element for lists, of the value for maps).
func (g *gen) goType(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return "bool"
	case protoreflect.EnumKind:
		return goTypeName(fd.Enum())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return "int32"
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return "uint32"
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return "int64"
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return "uint64"
	case protoreflect.FloatKind:
		return "float32"
	case protoreflect.DoubleKind:
		return "float64"
	case protoreflect.StringKind:
		return "string"
	case protoreflect.BytesKind:
		return "[]byte"
	}
	if wk, ok := wellKnown[fd.Message().FullName()]; ok {
		g.imports[wk[0]] = true
		return "*" + wk[0] + "." + wk[1]
	}
	return "*" + goTypeName(fd.Message())
}

func (g *gen) fieldType(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "map[" + g.goType(fd.MapKey()) + "]" + g.goType(fd.MapValue())
	case fd.IsList():
		return "[]" + g.goType(fd)
	}
	return g.goType(fd)
}

// zero is the value a getter returns for an unset field.
func zero(goType string) string {
	switch {
	case goType == "bool":
		return "false"
	case goType == "string":
		return `""`
	case strings.HasPrefix(goType, "*"), strings.HasPrefix(goType, "[]"), strings.HasPrefix(goType, "map["):
		return "nil"
	}
	return "0"
}

// wireTag is the `protobuf:"..."` struct tag value protoc-gen-go writes; the converter reads the
// field name from it and encoding/json ignores it. Checked against istio.io/api's tags.
func wireTag(fd protoreflect.FieldDescriptor) string {
	var kind string
	switch fd.Kind() {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Int64Kind,
		protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		kind = "varint"
	case protoreflect.Sint32Kind:
		kind = "zigzag32"
	case protoreflect.Sint64Kind:
		kind = "zigzag64"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		kind = "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		kind = "fixed64"
	default:
		kind = "bytes"
	}
	parts := []string{kind, strconv.Itoa(int(fd.Number()))}
	if fd.IsList() || fd.IsMap() {
		parts = append(parts, "rep")
	} else {
		parts = append(parts, "opt")
	}
	if fd.IsPacked() {
		parts = append(parts, "packed")
	}
	parts = append(parts, "name="+string(fd.Name()))
	inEntry := false
	if md, ok := fd.Parent().(protoreflect.MessageDescriptor); ok && md.IsMapEntry() {
		inEntry = true
	}
	if js := fd.JSONName(); js != string(fd.Name()) {
		parts = append(parts, "json="+js)
	}
	if fd.Syntax() == protoreflect.Proto3 && !inEntry {
		parts = append(parts, "proto3")
	}
	if fd.Enum() != nil {
		// The package and the enum's Go name, as protoc-gen-go writes it.
		parts = append(parts, "enum="+string(fd.Enum().ParentFile().Package())+"."+goTypeName(fd.Enum()))
	}
	if fd.ContainingOneof() != nil {
		parts = append(parts, "oneof")
	}
	return strings.Join(parts, ",")
}

func (g *gen) message(md protoreflect.MessageDescriptor) error {
	name := goTypeName(md)
	if err := g.claim(name, md.FullName()); err != nil {
		return err
	}
	g.p("// %s is %s.", name, md.FullName())
	g.p("type %s struct {", name)
	doneOneof := map[protoreflect.FullName]bool{}
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		if od := fd.ContainingOneof(); od != nil {
			if !doneOneof[od.FullName()] {
				doneOneof[od.FullName()] = true
				g.p("\t%s is%s_%s `protobuf_oneof:%q`", goCamel(string(od.Name())), name, goCamel(string(od.Name())), od.Name())
			}
			continue
		}
		tag := fmt.Sprintf("protobuf:%q json:%q", wireTag(fd), string(fd.Name())+",omitempty")
		if fd.IsMap() {
			tag += fmt.Sprintf(" protobuf_key:%q protobuf_val:%q", wireTag(fd.MapKey()), wireTag(fd.MapValue()))
		}
		g.p("\t%s %s `%s`", goCamel(string(fd.Name())), g.fieldType(fd), tag)
	}
	g.p("}")
	g.p("")
	g.p("func (*%s) protoName() protoreflect.FullName { return %q }", name, md.FullName())
	g.p("")
	g.p("// String formats x in the protobuf text format, as protoc-gen-go's String does.")
	g.p("func (x *%s) String() string { return textString(x) }", name)
	g.p("")
	if g.jsonOK(md.FullName()) {
		g.p("// MarshalJSON writes x in the protobuf JSON mapping, as istio.io/api's json shim does.")
		g.p("func (x *%s) MarshalJSON() ([]byte, error) { return marshalJSON(x) }", name)
		g.p("")
		g.p("// UnmarshalJSON reads the protobuf JSON mapping into x, ignoring unknown fields, as")
		g.p("// istio.io/api's json shim does.")
		g.p("func (x *%s) UnmarshalJSON(b []byte) error { return unmarshalJSON(b, x) }", name)
		g.p("")
	}
	if g.copyOK(md.FullName()) {
		g.p("// DeepCopyInto copies x into out, as istio.io/api's deepcopy shim does.")
		g.p("func (x *%s) DeepCopyInto(out *%s) { deepCopyInto(x, out) }", name, name)
		g.p("")
		g.p("// DeepCopy returns a copy of x.")
		g.p("func (x *%s) DeepCopy() *%s {", name, name)
		g.p("\tif x == nil {\n\t\treturn nil\n\t}\n\tout := new(%s)\n\tx.DeepCopyInto(out)\n\treturn out\n}", name)
		g.p("")
		g.p("// DeepCopyInterface returns a copy of x.")
		g.p("func (x *%s) DeepCopyInterface() interface{} { return x.DeepCopy() }", name)
		g.p("")
	}
	// Getters, in field order; a oneof's getter where its first member is.
	doneOneof = map[protoreflect.FullName]bool{}
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		fname := goCamel(string(fd.Name()))
		typ := g.fieldType(fd)
		if od := fd.ContainingOneof(); od != nil {
			oname := goCamel(string(od.Name()))
			if !doneOneof[od.FullName()] {
				doneOneof[od.FullName()] = true
				g.p("func (x *%s) Get%s() is%s_%s {", name, oname, name, oname)
				g.p("\tif x != nil {\n\t\treturn x.%s\n\t}\n\treturn nil\n}", oname)
				g.p("")
			}
			g.p("func (x *%s) Get%s() %s {", name, fname, typ)
			g.p("\tif x, ok := x.Get%s().(*%s); ok {\n\t\treturn x.%s\n\t}\n\treturn %s\n}", oname, g.wrapperName(md, fd), fname, zero(typ))
			g.p("")
			continue
		}
		g.p("func (x *%s) Get%s() %s {", name, fname, typ)
		g.p("\tif x != nil {\n\t\treturn x.%s\n\t}\n\treturn %s\n}", fname, zero(typ))
		g.p("")
	}
	// Oneof interfaces and wrappers.
	for i := range md.Oneofs().Len() {
		od := md.Oneofs().Get(i)
		if od.IsSynthetic() {
			continue
		}
		iface := "is" + name + "_" + goCamel(string(od.Name()))
		g.p("type %s interface{ %s() }", iface, iface)
		g.p("")
		for j := range od.Fields().Len() {
			fd := od.Fields().Get(j)
			w := g.wrapperName(md, fd)
			if err := g.claim(w, fd.FullName()); err != nil {
				return err
			}
			g.p("// %s holds %s.", w, fd.FullName())
			g.p("type %s struct {", w)
			g.p("\t%s %s `protobuf:%q`", goCamel(string(fd.Name())), g.fieldType(fd), wireTag(fd))
			g.p("}")
			g.p("")
			g.p("func (*%s) %s() {}", w, iface)
			g.p("")
		}
		g.p("func (*%s) oneofWrappers() []any {", name)
		g.p("\treturn []any{")
		for j := range od.Fields().Len() {
			g.p("\t\t(*%s)(nil),", g.wrapperName(md, od.Fields().Get(j)))
		}
		g.p("\t}\n}")
		g.p("")
	}
	if md.Oneofs().Len() > 1 {
		return fmt.Errorf("%s: more than one oneof is not supported", md.FullName())
	}
	return nil
}

// wrapperName is the Go type protoc-gen-go gives a oneof member: Message_Field, with '_'
// appended while that clashes with a nested message or enum (Tracing_Zipkin_).
func (g *gen) wrapperName(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor) string {
	name := goTypeName(md) + "_" + goCamel(string(fd.Name()))
	for taken(md, name) {
		name += "_"
	}
	return name
}

func taken(md protoreflect.MessageDescriptor, name string) bool {
	for i := range md.Messages().Len() {
		if goTypeName(md.Messages().Get(i)) == name {
			return true
		}
	}
	for i := range md.Enums().Len() {
		if goTypeName(md.Enums().Get(i)) == name {
			return true
		}
	}
	return false
}

func (g *gen) enum(ed protoreflect.EnumDescriptor) error {
	name := goTypeName(ed)
	if err := g.claim(name, ed.FullName()); err != nil {
		return err
	}
	prefix := enumValuePrefix(ed)
	g.p("// %s is %s.", name, ed.FullName())
	g.p("type %s int32", name)
	g.p("")
	g.p("const (")
	for i := range ed.Values().Len() {
		v := ed.Values().Get(i)
		c := prefix + "_" + string(v.Name())
		if err := g.claim(c, v.FullName()); err != nil {
			return err
		}
		g.p("\t%s %s = %d", c, name, v.Number())
	}
	g.p(")")
	g.p("")
	g.p("// Enum returns a pointer to a copy of x, as protoc-gen-go's Enum does.")
	g.p("func (x %s) Enum() *%s { return &x }", name, name)
	g.p("")
	g.p("// String is the value's name in the proto, or its number when it has none.")
	g.p("func (x %s) String() string {", name)
	g.p("\tswitch x {")
	seen := map[protoreflect.EnumNumber]bool{}
	for i := range ed.Values().Len() {
		v := ed.Values().Get(i)
		if seen[v.Number()] { // an alias: the first name wins, as in protoreflect
			continue
		}
		seen[v.Number()] = true
		g.p("\tcase %d:\n\t\treturn %q", v.Number(), v.Name())
	}
	g.p("\t}\n\treturn strconv.Itoa(int(x))\n}")
	g.p("")
	return nil
}

// goSource returns the formatted Go source of package pkg holding root's closure.
func goSource(pkg, version string, root protoreflect.MessageDescriptor, jsonOK, copyOK func(protoreflect.FullName) bool) ([]byte, error) {
	c, err := closureOf(root)
	if err != nil {
		return nil, err
	}
	g := &gen{imports: map[string]bool{}, names: map[string]protoreflect.FullName{}, jsonOK: jsonOK, copyOK: copyOK}
	for _, md := range c.messages {
		if err := g.message(md); err != nil {
			return nil, err
		}
	}
	for _, ed := range c.enums {
		if err := g.enum(ed); err != nil {
			return nil, err
		}
	}
	body := g.buf.Bytes()
	var head bytes.Buffer
	fmt.Fprintf(&head, "// Code generated by meshconfig/meshapi/internal/genmeshapi from istio.io/api %s. DO NOT EDIT.\n\n", version)
	fmt.Fprintf(&head, "package %s\n\n", pkg)
	fmt.Fprintf(&head, "import (\n\t\"strconv\"\n\n\t\"google.golang.org/protobuf/reflect/protoreflect\"\n")
	var aliases []string
	for a := range g.imports {
		aliases = append(aliases, a)
	}
	slices.Sort(aliases)
	for _, a := range aliases {
		fmt.Fprintf(&head, "\t%q\n", importPath[a])
	}
	head.WriteString(")\n\n")
	fmt.Fprintf(&head, "// IstioAPIVersion is the version of istio.io/api these types were generated from.\n")
	fmt.Fprintf(&head, "const IstioAPIVersion = %q\n\n", version)
	head.Write(body)
	out, err := format.Source(head.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format generated code: %w", err)
	}
	return out, nil
}
