package meshgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// kindsFile is a proto3 file whose message Kinds holds every field kind, label and map key kind
// the generator accepts, including the ones ProxyConfig's closure lacks today (64-bit integers,
// floats, bytes, bool and integer map keys, enum lists, scalar oneof members, every wrapper, an
// enum alias, a json_name), so that the generated writer's code for them is checked too.
func kindsFile() *descriptorpb.FileDescriptorProto {
	type T = descriptorpb.FieldDescriptorProto_Type
	const (
		opt = descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
		rep = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	)
	field := func(num int32, name string, label descriptorpb.FieldDescriptorProto_Label, typ T, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Label: label.Enum(), Type: typ.Enum()}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	const (
		tBool, tInt32, tSint32, tSfixed32 = descriptorpb.FieldDescriptorProto_TYPE_BOOL, descriptorpb.FieldDescriptorProto_TYPE_INT32, descriptorpb.FieldDescriptorProto_TYPE_SINT32, descriptorpb.FieldDescriptorProto_TYPE_SFIXED32
		tInt64, tSint64, tSfixed64        = descriptorpb.FieldDescriptorProto_TYPE_INT64, descriptorpb.FieldDescriptorProto_TYPE_SINT64, descriptorpb.FieldDescriptorProto_TYPE_SFIXED64
		tUint32, tFixed32, tUint64        = descriptorpb.FieldDescriptorProto_TYPE_UINT32, descriptorpb.FieldDescriptorProto_TYPE_FIXED32, descriptorpb.FieldDescriptorProto_TYPE_UINT64
		tFixed64, tFloat, tDouble         = descriptorpb.FieldDescriptorProto_TYPE_FIXED64, descriptorpb.FieldDescriptorProto_TYPE_FLOAT, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
		tString, tBytes, tEnum, tMsg      = descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_BYTES, descriptorpb.FieldDescriptorProto_TYPE_ENUM, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
		color, inner                      = ".wingman.kindtest.Kinds.Color", ".wingman.kindtest.Kinds.Inner"
		duration                          = ".google.protobuf.Duration"
	)
	kinds := &descriptorpb.DescriptorProto{Name: proto.String("Kinds")}
	add := func(fs ...*descriptorpb.FieldDescriptorProto) { kinds.Field = append(kinds.Field, fs...) }
	add(field(1, "f_bool", opt, tBool, ""), field(2, "f_int32", opt, tInt32, ""), field(3, "f_sint32", opt, tSint32, ""),
		field(4, "f_sfixed32", opt, tSfixed32, ""), field(5, "f_int64", opt, tInt64, ""), field(6, "f_sint64", opt, tSint64, ""),
		field(7, "f_sfixed64", opt, tSfixed64, ""), field(8, "f_uint32", opt, tUint32, ""), field(9, "f_fixed32", opt, tFixed32, ""),
		field(10, "f_uint64", opt, tUint64, ""), field(11, "f_fixed64", opt, tFixed64, ""), field(12, "f_float", opt, tFloat, ""),
		field(13, "f_double", opt, tDouble, ""), field(14, "f_string", opt, tString, ""), field(15, "f_bytes", opt, tBytes, ""),
		field(16, "f_enum", opt, tEnum, color), field(17, "f_inner", opt, tMsg, inner), field(18, "f_duration", opt, tMsg, duration))
	for i, w := range []string{"BoolValue", "Int32Value", "Int64Value", "UInt32Value", "UInt64Value", "FloatValue", "DoubleValue", "StringValue"} {
		add(field(int32(19+i), "w_"+strings.ToLower(w), opt, tMsg, ".google.protobuf."+w))
	}
	custom := field(27, "f_2nd_custom", opt, tString, "")
	custom.JsonName = proto.String("customName")
	add(custom, field(28, "f_2nd_value", opt, tString, ""))
	add(field(30, "r_int64", rep, tInt64, ""), field(31, "r_float", rep, tFloat, ""), field(32, "r_bytes", rep, tBytes, ""),
		field(33, "r_enum", rep, tEnum, color), field(34, "r_inner", rep, tMsg, inner), field(35, "r_duration", rep, tMsg, duration),
		field(36, "r_string", rep, tString, ""), field(37, "r_wrap", rep, tMsg, ".google.protobuf.UInt64Value"),
		field(38, "r_bool", rep, tBool, ""), field(39, "r_fixed64", rep, tFixed64, ""))
	entry := func(name string, k T, v T, vName string) string {
		kinds.NestedType = append(kinds.NestedType, &descriptorpb.DescriptorProto{
			Name:    proto.String(name),
			Field:   []*descriptorpb.FieldDescriptorProto{field(1, "key", opt, k, ""), field(2, "value", opt, v, vName)},
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
		})
		return ".wingman.kindtest.Kinds." + name
	}
	add(field(40, "m_bool_string", rep, tMsg, entry("MBoolStringEntry", tBool, tString, "")),
		field(41, "m_int32_inner", rep, tMsg, entry("MInt32InnerEntry", tInt32, tMsg, inner)),
		field(42, "m_uint64_int64", rep, tMsg, entry("MUint64Int64Entry", tUint64, tInt64, "")),
		field(43, "m_sint64_enum", rep, tMsg, entry("MSint64EnumEntry", tSint64, tEnum, color)),
		field(44, "m_string_duration", rep, tMsg, entry("MStringDurationEntry", tString, tMsg, duration)),
		field(45, "m_fixed32_bytes", rep, tMsg, entry("MFixed32BytesEntry", tFixed32, tBytes, "")),
		field(46, "m_string_float", rep, tMsg, entry("MStringFloatEntry", tString, tMsg, ".google.protobuf.FloatValue")),
		field(47, "m_sfixed64_double", rep, tMsg, entry("MSfixed64DoubleEntry", tSfixed64, tDouble, "")))
	kinds.OneofDecl = []*descriptorpb.OneofDescriptorProto{{Name: proto.String("choice")}}
	for _, f := range []*descriptorpb.FieldDescriptorProto{
		field(50, "o_int64", opt, tInt64, ""), field(51, "o_string", opt, tString, ""), field(52, "o_inner", opt, tMsg, inner),
		field(53, "o_enum", opt, tEnum, color), field(54, "o_bytes", opt, tBytes, ""), field(55, "o_wrap", opt, tMsg, ".google.protobuf.UInt64Value"),
		field(56, "o_double", opt, tDouble, ""), field(57, "o_duration", opt, tMsg, duration), field(58, "o_bool", opt, tBool, ""),
	} {
		f.OneofIndex = proto.Int32(0)
		add(f)
	}
	add(field(60, "after_oneof", opt, tUint32, ""))
	kinds.NestedType = append(kinds.NestedType, &descriptorpb.DescriptorProto{
		Name: proto.String("Inner"),
		Field: []*descriptorpb.FieldDescriptorProto{field(1, "name", opt, tString, ""), field(2, "count", opt, tInt64, ""),
			field(3, "child", opt, tMsg, inner), field(4, "tags", rep, tMsg, ".wingman.kindtest.Kinds.Inner.TagsEntry")},
		NestedType: []*descriptorpb.DescriptorProto{{
			Name:    proto.String("TagsEntry"),
			Field:   []*descriptorpb.FieldDescriptorProto{field(1, "key", opt, tString, ""), field(2, "value", opt, tString, "")},
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
		}},
	})
	value := func(name string, n int32) *descriptorpb.EnumValueDescriptorProto {
		return &descriptorpb.EnumValueDescriptorProto{Name: proto.String(name), Number: proto.Int32(n)}
	}
	kinds.EnumType = []*descriptorpb.EnumDescriptorProto{{
		Name:    proto.String("Color"),
		Value:   []*descriptorpb.EnumValueDescriptorProto{value("RED", 0), value("GREEN", 1), value("BLUE", 2), value("CRIMSON", 1)},
		Options: &descriptorpb.EnumOptions{AllowAlias: proto.Bool(true)},
	}}
	return &descriptorpb.FileDescriptorProto{
		Name:        proto.String("wingman/kindtest.proto"),
		Package:     proto.String("wingman.kindtest"),
		Syntax:      proto.String("proto3"),
		Dependency:  []string{"google/protobuf/duration.proto", "google/protobuf/wrappers.proto"},
		MessageType: []*descriptorpb.DescriptorProto{kinds},
	}
}

// kindsCheck is the test run in the package built from the generated Kinds: random fillings
// (random_test.go, copied from meshapi) written by the generated writer and by protojson through
// a dynamic message of the same descriptor must give the same bytes, or both an error.
const kindsCheck = `package meshapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

func TestKinds(t *testing.T) {
	raw, err := os.ReadFile("kinds.pb")
	if err != nil {
		t.Fatal(err)
	}
	fdp := &descriptorpb.FileDescriptorProto{}
	if err := proto.Unmarshal(raw, fdp); err != nil {
		t.Fatal(err)
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().ByName("Kinds")
	refused, written := 0, 0
	for seed := range uint64(10000) {
		r := rand.New(rand.NewPCG(seed, 99))
		x := &Kinds{}
		randomFill(r, reflect.ValueOf(x).Elem(), 3)
		got, err := MarshalProtoJSON(x)
		m, convErr := ToDynamicOf(x, md)
		if convErr != nil { // a wrapper's invalid UTF-8, which proto.Marshal refuses as protojson would
			if err == nil {
				t.Fatalf("seed %d: ToDynamic refused (%v), the writer did not", seed, convErr)
			}
			refused++
			continue
		}
		want, wantErr := protojson.Marshal(m)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("seed %d: error %v, protojson %v", seed, err, wantErr)
		}
		if err != nil {
			refused++
			continue
		}
		var c bytes.Buffer
		if err := json.Compact(&c, want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, c.Bytes()) {
			t.Fatalf("seed %d:\n got: %s\nwant: %s", seed, got, c.Bytes())
		}
		if len(got) > 200 {
			written++
		}
	}
	if refused == 0 || written < 1500 {
		t.Fatalf("%d refused, %d long ones written: the filling is too thin", refused, written)
	}
}
`

// TestJSONWriterAllKinds generates the types and JSON writer of kindsFile's Kinds, builds them
// in a copy of meshapi (its hand-written files, with the generated ones replaced) in a scratch
// module, and runs kindsCheck there. Expected values come from protojson.
func TestJSONWriterAllKinds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a package")
	}
	fdp := kindsFile()
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().ByName("Kinds")
	no := func(protoreflect.FullName) bool { return false }
	types, err := goSource("meshapi", "kindtest", md, no, no)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := jsonSource("meshapi", "kindtest", md)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(fdp)
	if err != nil {
		t.Fatal(err)
	}
	root := "../../../.." // the module's
	tmp := t.TempDir()
	copyFiles(t, root, tmp, "go.mod", "go.sum")
	for _, dep := range []string{"internal/lazydesc", "internal/jsonstr"} { // what meshapi imports of this module
		copyDir(t, filepath.Join(root, dep), filepath.Join(tmp, dep), func(n string) bool {
			return strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go")
		})
	}
	pkg := filepath.Join(tmp, "meshconfig/meshapi")
	copyDir(t, filepath.Join(root, "meshconfig/meshapi"), pkg, func(n string) bool {
		return n == "random_test.go" || n == DescFile || n == ProxyDescFile ||
			strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") && !strings.HasSuffix(n, ".gen.go")
	})
	for name, b := range map[string][]byte{GoFile: types, JSONFile: writer, "kinds.pb": raw, "kinds_check_test.go": []byte(kindsCheck)} {
		if err := os.WriteFile(filepath.Join(pkg, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "./meshconfig/meshapi")
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test of the generated Kinds: %v\n%s", err, out)
	}
}

func copyFiles(t *testing.T, from, to string, names ...string) {
	t.Helper()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func copyDir(t *testing.T, from, to string, keep func(name string) bool) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.IsDir() && keep(e.Name()) {
			copyFiles(t, from, to, e.Name())
		}
	}
}
