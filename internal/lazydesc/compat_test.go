package lazydesc

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// verifiedProtobufGo is the google.golang.org/protobuf version the builder's use of
// protoimpl.DescBuilder was last verified against (see the package doc). protoimpl is outside
// protobuf-go's compatibility promise except for what generated code does, and Build uses it in a
// way generated code does not (a registry of its own, counts left to the builder), so an upgrade
// must be re-checked by hand before this constant moves; TestProtobufGoVerified says what to check.
const verifiedProtobufGo = "v1.36.12"

// TestProtobufGoVerified fails when go.mod requires a protobuf-go other than the one the builder
// was verified against, so that an upgrade cannot pass unread.
func TestProtobufGoVerified(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?google\.golang\.org/protobuf\s+(\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require google.golang.org/protobuf")
	}
	if regexp.MustCompile(`(?m)^\s*(?:replace\s+)?google\.golang\.org/protobuf\b.*=>`).Match(mod) {
		t.Fatal("go.mod replaces google.golang.org/protobuf: internal/lazydesc was verified against the upstream module only")
	}
	if got := string(m[1]); got != verifiedProtobufGo {
		t.Fatalf(`go.mod requires google.golang.org/protobuf %s; internal/lazydesc was verified against %s.
protoimpl.DescBuilder is covered by protobuf-go's compatibility promise only as generated code uses it.
Before changing verifiedProtobufGo, re-verify in the new version:
  - runtime/protoimpl still defines DescBuilder as internal/filedesc.Builder;
  - filedesc.Builder still has RawDescriptor and FileRegistry, Build still derives the counts when
    NumEnums+NumMessages+NumExtensions+NumServices is zero, and still registers the file in
    FileRegistry (not protoregistry.GlobalFiles) when one is given;
  - Build still resolves imports, field types and extendees through FileRegistry;
  - internal/impl/legacy_file.go still builds the same way (RawDescriptor and a FileRegistry, no
    counts): while protobuf-go itself relies on that path it is unlikely to break silently;
and run this package's tests, which compare every embedded set against protodesc's build.`, got, verifiedProtobufGo)
	}
}

// TestBuildMatchesReference: for every embedded set, every file, message, field, oneof, enum,
// value, extension and service of the lazily built registry has the same properties (the
// computed ones too: presence, packing, JSON names, defaults, closed enums, resolved types,
// options) as protodesc's build of the same bytes, the supported way. A protobuf-go change to
// the builder's reading of raw descriptors fails here.
func TestBuildMatchesReference(t *testing.T) {
	for _, path := range embeddedSets {
		t.Run(path, func(t *testing.T) {
			lazy, ref := buildBoth(t, path)
			n := 0
			ref.RangeFiles(func(rf protoreflect.FileDescriptor) bool {
				lf, err := lazy.FindFileByPath(rf.Path())
				if err != nil {
					t.Error(err)
					return true
				}
				want, got := describeFile(rf), describeFile(lf)
				if got != want {
					t.Errorf("%s differs from protodesc's build:\n%s", rf.Path(), firstDiff(got, want))
				}
				n++
				return true
			})
			if n != lazy.NumFiles() {
				t.Errorf("%d files built, protodesc built %d", lazy.NumFiles(), n)
			}
			t.Logf("%d files compared", n)
		})
	}
}

// TestRoundTripMatchesReference: for every message of every embedded set, a dynamic message
// of the lazily built descriptor, filled alike with every field set, encodes to the same bytes
// and the same protojson as one of protodesc's descriptor, and its bytes decode back (with the
// lazy descriptor) to the same message.
func TestRoundTripMatchesReference(t *testing.T) {
	for _, path := range embeddedSets {
		t.Run(path, func(t *testing.T) {
			lazy, ref := buildBoth(t, path)
			n := 0
			ref.RangeFiles(func(rf protoreflect.FileDescriptor) bool {
				rangeMessages(rf.Messages(), func(rm protoreflect.MessageDescriptor) {
					if rm.IsMapEntry() {
						return
					}
					lm, err := FindMessage(lazy, rm.FullName())
					if err != nil {
						t.Error(err)
						return
					}
					roundTrip(t, lm, rm, lazy, ref)
					n++
				})
				return true
			})
			if n == 0 {
				t.Fatal("no message in the set")
			}
			t.Logf("%d messages round-tripped", n)
		})
	}
}

func roundTrip(t *testing.T, lm, rm protoreflect.MessageDescriptor, lazy, ref *protoregistry.Files) {
	t.Helper()
	l, r := dynamicpb.NewMessage(lm), dynamicpb.NewMessage(rm)
	fill(l, 1)
	fill(r, 1)
	det := proto.MarshalOptions{Deterministic: true}
	lb, err := det.Marshal(l)
	if err != nil {
		t.Errorf("%s: %v", lm.FullName(), err)
		return
	}
	rb, err := det.Marshal(r)
	if err != nil {
		t.Errorf("%s (protodesc): %v", rm.FullName(), err)
		return
	}
	if string(lb) != string(rb) {
		t.Errorf("%s: encodes differently from protodesc's descriptor", lm.FullName())
		return
	}
	back := dynamicpb.NewMessage(lm)
	if err := proto.Unmarshal(lb, back); err != nil {
		t.Errorf("%s: decode: %v", lm.FullName(), err)
		return
	}
	if !proto.Equal(back, l) {
		t.Errorf("%s: decodes to a different message", lm.FullName())
	}
	if strings.HasPrefix(string(lm.FullName()), "google.protobuf.") {
		return // well-known types have JSON forms of their own that need valid values
	}
	lj, lerr := protojson.MarshalOptions{Resolver: dynamicpb.NewTypes(lazy)}.Marshal(l)
	rj, rerr := protojson.MarshalOptions{Resolver: dynamicpb.NewTypes(ref)}.Marshal(r)
	if (lerr == nil) != (rerr == nil) || string(lj) != string(rj) {
		t.Errorf("%s: protojson differs from protodesc's descriptor:\n%s (%v)\n%s (%v)", lm.FullName(), lj, lerr, rj, rerr)
		return
	}
	if lerr != nil {
		return
	}
	jback := dynamicpb.NewMessage(lm)
	if err := (protojson.UnmarshalOptions{Resolver: dynamicpb.NewTypes(lazy)}).Unmarshal(lj, jback); err != nil {
		t.Errorf("%s: protojson decode: %v", lm.FullName(), err)
	} else if !proto.Equal(jback, l) {
		t.Errorf("%s: protojson decodes to a different message", lm.FullName())
	}
}

// fill sets every field of m to a value derived from the field (the same for both builds):
// scalars, enums, lists of two, maps of one, and messages one level down (scalars only there;
// well-known types, whose JSON forms constrain their values, left empty).
func fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			if v, ok := value(fd.MapValue(), depth); ok {
				k, _ := scalar(fd.MapKey())
				m.Mutable(fd).Map().Set(k.MapKey(), v)
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range 2 {
				if v, ok := value(fd, depth); ok {
					l.Append(v)
				}
			}
		default:
			if v, ok := value(fd, depth); ok {
				m.Set(fd, v)
			}
		}
	}
}

func value(fd protoreflect.FieldDescriptor, depth int) (protoreflect.Value, bool) {
	if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
		return scalar(fd)
	}
	if depth == 0 || strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
		return protoreflect.Value{}, false
	}
	m := dynamicpb.NewMessage(fd.Message())
	fill(m, depth-1)
	return protoreflect.ValueOfMessage(m), true
}

func scalar(fd protoreflect.FieldDescriptor) (protoreflect.Value, bool) {
	n := int64(fd.Number())
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true), true
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number()), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(-n)), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n)), true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-n << 33), true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n) << 33), true
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) + 0.5), true
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) + 0.25), true
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s·%d", fd.Name(), n)), true
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{byte(n), 0, 0xff}), true
	}
	return protoreflect.Value{}, false
}

// buildBoth builds the set at path with Build and with protodesc.NewFiles (the reference).
func buildBoth(t *testing.T, path string) (lazy, ref *protoregistry.Files) {
	t.Helper()
	gz, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lazy, err = Build(gz)
	if err != nil {
		t.Fatal(err)
	}
	ref, err = protodesc.NewFiles(decodeSet(t, gz))
	if err != nil {
		t.Fatalf("protodesc refuses the set: %v", err)
	}
	return lazy, ref
}

func rangeMessages(ms protoreflect.MessageDescriptors, f func(protoreflect.MessageDescriptor)) {
	for i := range ms.Len() {
		f(ms.Get(i))
		rangeMessages(ms.Get(i).Messages(), f)
	}
}

// describeFile writes every property protoreflect gives of fd and of what it declares, one line
// each, so that two builds of one file compare as text.
func describeFile(fd protoreflect.FileDescriptor) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("file %s package %s syntax %v placeholder %v options %s", fd.Path(), fd.Package(), fd.Syntax(), fd.IsPlaceholder(), options(fd))
	for i := range fd.Imports().Len() {
		imp := fd.Imports().Get(i)
		p("import %s public %v weak %v placeholder %v", imp.Path(), imp.IsPublic, imp.IsWeak, imp.IsPlaceholder())
	}
	var msgs func(ms protoreflect.MessageDescriptors)
	enums := func(es protoreflect.EnumDescriptors) {
		for i := range es.Len() {
			e := es.Get(i)
			p("enum %s closed %v options %s reserved %v %v", e.FullName(), e.IsClosed(), options(e), names(e.ReservedNames()), ranges(e.ReservedRanges()))
			for j := range e.Values().Len() {
				v := e.Values().Get(j)
				p("  value %s = %d index %d options %s", v.FullName(), v.Number(), v.Index(), options(v))
			}
		}
	}
	msgs = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			m := ms.Get(i)
			p("message %s mapentry %v options %s reserved %v %v required %v", m.FullName(), m.IsMapEntry(), options(m), names(m.ReservedNames()), ranges(m.ReservedRanges()), m.RequiredNumbers())
			for j := range m.ExtensionRanges().Len() {
				p("  extension range %v options %s", m.ExtensionRanges().Get(j), optionBytes(m.ExtensionRangeOptions(j)))
			}
			for j := range m.Oneofs().Len() {
				o := m.Oneofs().Get(j)
				var fs []string
				for k := range o.Fields().Len() {
					fs = append(fs, string(o.Fields().Get(k).Name()))
				}
				p("  oneof %s synthetic %v fields %v options %s", o.FullName(), o.IsSynthetic(), fs, options(o))
			}
			for j := range m.Fields().Len() {
				field(p, m.Fields().Get(j))
			}
			enums(m.Enums())
			msgs(m.Messages())
			for j := range m.Extensions().Len() {
				field(p, m.Extensions().Get(j))
			}
		}
	}
	enums(fd.Enums())
	msgs(fd.Messages())
	for i := range fd.Extensions().Len() {
		field(p, fd.Extensions().Get(i))
	}
	for i := range fd.Services().Len() {
		s := fd.Services().Get(i)
		p("service %s options %s", s.FullName(), options(s))
		for j := range s.Methods().Len() {
			md := s.Methods().Get(j)
			p("  method %s in %s out %s stream %v/%v options %s", md.FullName(), md.Input().FullName(), md.Output().FullName(), md.IsStreamingClient(), md.IsStreamingServer(), options(md))
		}
	}
	return b.String()
}

func field(p func(string, ...any), f protoreflect.FieldDescriptor) {
	p("  field %s = %d index %d %v %v json %v/%q text %q presence %v optional %v packed %v list %v map %v ext %v weak %v",
		f.FullName(), f.Number(), f.Index(), f.Cardinality(), f.Kind(), f.HasJSONName(), f.JSONName(), f.TextName(),
		f.HasPresence(), f.HasOptionalKeyword(), f.IsPacked(), f.IsList(), f.IsMap(), f.IsExtension(), f.IsWeak())
	def := ""
	if f.HasDefault() {
		def = fmt.Sprintf("%v", f.Default().Interface())
		if ev := f.DefaultEnumValue(); ev != nil {
			def += " " + string(ev.FullName())
		}
	}
	var oneof, msg, enum string
	if o := f.ContainingOneof(); o != nil {
		oneof = string(o.FullName())
	}
	if m := f.Message(); m != nil {
		msg = fmt.Sprintf("%s placeholder %v", m.FullName(), m.IsPlaceholder())
	}
	if e := f.Enum(); e != nil {
		enum = fmt.Sprintf("%s placeholder %v", e.FullName(), e.IsPlaceholder())
	}
	c := f.ContainingMessage()
	p("    default %v %q oneof %q message %q enum %q in %s placeholder %v options %s",
		f.HasDefault(), def, oneof, msg, enum, c.FullName(), c.IsPlaceholder(), options(f))
}

// options is a descriptor's options encoded deterministically (unknown fields kept, so options
// of extensions the binary does not link compare too).
func options(d interface {
	Options() protoreflect.ProtoMessage
}) string {
	return optionBytes(d.Options())
}

func optionBytes(m protoreflect.ProtoMessage) string {
	if m == nil {
		return "<nil>"
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%x", b)
}

func names(n protoreflect.Names) []protoreflect.Name {
	var out []protoreflect.Name
	for i := range n.Len() {
		out = append(out, n.Get(i))
	}
	return out
}

func ranges[N protoreflect.FieldNumber | protoreflect.EnumNumber, R interface {
	Len() int
	Get(int) [2]N
}](r R) [][2]N {
	var out [][2]N
	for i := range r.Len() {
		out = append(out, r.Get(i))
	}
	return out
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n  lazy:      %s\n  protodesc: %s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("lazy has %d lines, protodesc %d", len(g), len(w))
}
