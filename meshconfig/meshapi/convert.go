package meshapi

import (
	"fmt"
	"math"
	"reflect"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Message is a generated type of this package: a pointer to one of its structs.
type Message interface {
	protoName() protoreflect.FullName
	jsonMessage // generated: protojson.gen.go
}

// oneofHolder is implemented by the generated types that have a oneof: it lists the wrapper
// types of its members, which reflection cannot find from the interface alone.
type oneofHolder interface {
	oneofWrappers() []any
}

// ToDynamic returns a dynamic message of x's proto type holding x's fields. A nil x gives an empty
// message. Well-known types (durations, wrappers) are carried over through their wire bytes.
func ToDynamic(x Message) (*dynamicpb.Message, error) {
	md, err := Descriptor(x.protoName())
	if err != nil {
		return nil, err
	}
	return ToDynamicOf(x, md)
}

// ToDynamicOf is ToDynamic into a message of descriptor md (of x's proto type), for a message
// that must share descriptors with another one (a merge).
func ToDynamicOf(x Message, md protoreflect.MessageDescriptor) (*dynamicpb.Message, error) {
	if md.FullName() != x.protoName() {
		return nil, fmt.Errorf("meshapi: %s descriptor given for %s", md.FullName(), x.protoName())
	}
	m := dynamicpb.NewMessage(md)
	v := reflect.ValueOf(x)
	if v.IsNil() {
		return m, nil
	}
	if err := toMessage(v.Elem(), m); err != nil {
		return nil, fmt.Errorf("%s: %w", x.protoName(), err)
	}
	return m, nil
}

// FromDynamic replaces *x with the fields of m, which must be a message of x's proto type (from
// the embedded descriptors or any other descriptor of the same fields).
func FromDynamic(m protoreflect.Message, x Message) error {
	if got := m.Descriptor().FullName(); got != x.protoName() {
		return fmt.Errorf("meshapi: %s message given for %s", got, x.protoName())
	}
	v := reflect.ValueOf(x).Elem()
	v.SetZero()
	if err := fromMessage(m, v); err != nil {
		return fmt.Errorf("%s: %w", x.protoName(), err)
	}
	return nil
}

// fieldPlan maps one proto field to where it lives in a generated struct.
type fieldPlan struct {
	name    protoreflect.Name
	index   int          // of the struct field (for a oneof member: of the oneof's interface field)
	wrapper reflect.Type // for a oneof member, the pointer-to-wrapper type; nil otherwise
}

// structPlan is how one generated struct type maps to its message. Immutable once built.
type structPlan struct {
	fields []fieldPlan
	byName map[protoreflect.Name]fieldPlan
}

var plans sync.Map // reflect.Type (struct) -> *structPlan

func planOf(t reflect.Type) *structPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*structPlan)
	}
	p := &structPlan{byName: map[protoreflect.Name]fieldPlan{}}
	var wrappers []any
	if h, ok := reflect.New(t).Interface().(oneofHolder); ok {
		wrappers = h.oneofWrappers()
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		if sf.Tag.Get("protobuf_oneof") != "" {
			for _, w := range wrappers {
				wt := reflect.TypeOf(w)
				if wt.Implements(sf.Type) {
					p.add(fieldPlan{name: tagName(wt.Elem().Field(0).Tag.Get("protobuf")), index: i, wrapper: wt})
				}
			}
			continue
		}
		p.add(fieldPlan{name: tagName(sf.Tag.Get("protobuf")), index: i})
	}
	got, _ := plans.LoadOrStore(t, p)
	return got.(*structPlan)
}

func (p *structPlan) add(f fieldPlan) {
	p.fields = append(p.fields, f)
	p.byName[f.name] = f
}

// tagName is the name=... element of a protobuf struct tag.
func tagName(tag string) protoreflect.Name {
	for len(tag) > 0 {
		var part string
		part, tag, _ = cut(tag, ',')
		if len(part) > 5 && part[:5] == "name=" {
			return protoreflect.Name(part[5:])
		}
	}
	return ""
}

func cut(s string, sep byte) (before, after string, found bool) {
	for i := range len(s) {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func toMessage(v reflect.Value, m protoreflect.Message) error {
	fds := m.Descriptor().Fields()
	for _, f := range planOf(v.Type()).fields {
		fd := fds.ByName(f.name)
		if fd == nil {
			return fmt.Errorf("Go field %s: no proto field %q", v.Type().Field(f.index).Name, f.name)
		}
		fv := v.Field(f.index)
		if f.wrapper != nil {
			if fv.IsNil() || fv.Elem().Type() != f.wrapper || fv.Elem().IsNil() {
				continue
			}
			val, err := toSingle(fd, fv.Elem().Elem().Field(0), func() protoreflect.Message { return m.NewField(fd).Message() })
			if err != nil {
				return err
			}
			m.Set(fd, val)
			continue
		}
		switch {
		case fd.IsMap():
			if fv.Len() == 0 {
				continue
			}
			mm := m.Mutable(fd).Map()
			iter := fv.MapRange()
			for iter.Next() {
				key, err := toSingle(fd.MapKey(), iter.Key(), nil)
				if err != nil {
					return err
				}
				val, err := toSingle(fd.MapValue(), iter.Value(), func() protoreflect.Message { return mm.NewValue().Message() })
				if err != nil {
					return err
				}
				mm.Set(key.MapKey(), val)
			}
		case fd.IsList():
			if fv.Len() == 0 {
				continue
			}
			l := m.Mutable(fd).List()
			for i := range fv.Len() {
				val, err := toSingle(fd, fv.Index(i), func() protoreflect.Message { return l.NewElement().Message() })
				if err != nil {
					return err
				}
				l.Append(val)
			}
		default:
			if unsetScalar(fd, fv) {
				continue // proto3: a zero scalar or nil message is unset
			}
			val, err := toSingle(fd, fv, func() protoreflect.Message { return m.NewField(fd).Message() })
			if err != nil {
				return err
			}
			m.Set(fd, val)
		}
	}
	return nil
}

// unsetScalar says whether the Go value fv of the proto3 field fd (no presence, not in a oneof)
// is the unset value. A float is unset when its bits are zero: -0 is set, as protoc-gen-go's
// messages (istio.io/api's) and dynamicpb have it, where reflect's IsZero says -0 is zero.
func unsetScalar(fd protoreflect.FieldDescriptor, fv reflect.Value) bool {
	switch fd.Kind() {
	case protoreflect.BytesKind:
		return fv.Len() == 0
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return math.Float64bits(fv.Float()) == 0
	}
	return fv.IsZero()
}

// toSingle converts one Go value (not a list or map) of field fd; newMsg makes the message a
// message-typed value is written into.
func toSingle(fd protoreflect.FieldDescriptor, fv reflect.Value, newMsg func() protoreflect.Message) (protoreflect.Value, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(fv.Bool()), nil
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(fv.Int())), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(fv.Int())), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(fv.Int()), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(fv.Uint())), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(fv.Uint()), nil
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(fv.Float())), nil
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(fv.Float()), nil
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fv.String()), nil
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(append([]byte(nil), fv.Bytes()...)), nil
	case protoreflect.MessageKind:
		nm := newMsg()
		if fv.IsNil() {
			return protoreflect.ValueOfMessage(nm), nil // a nil list element or map value is an empty message
		}
		if pm, ok := fv.Interface().(proto.Message); ok { // a well-known type
			b, err := proto.Marshal(pm)
			if err == nil {
				err = proto.Unmarshal(b, nm.Interface())
			}
			if err != nil {
				return protoreflect.Value{}, fmt.Errorf("field %s: %w", fd.Name(), err)
			}
			return protoreflect.ValueOfMessage(nm), nil
		}
		if err := toMessage(fv.Elem(), nm); err != nil {
			return protoreflect.Value{}, fmt.Errorf("field %s: %w", fd.Name(), err)
		}
		return protoreflect.ValueOfMessage(nm), nil
	}
	return protoreflect.Value{}, fmt.Errorf("field %s: kind %s not supported", fd.Name(), fd.Kind())
}

func fromMessage(m protoreflect.Message, v reflect.Value) error {
	plan := planOf(v.Type())
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		f, ok := plan.byName[fd.Name()]
		if !ok {
			err = fmt.Errorf("proto field %s has no Go field", fd.Name())
			return false
		}
		if f.wrapper != nil {
			w := reflect.New(f.wrapper.Elem())
			if err = fromSingle(fd, val, w.Elem().Field(0)); err != nil {
				return false
			}
			v.Field(f.index).Set(w)
			return true
		}
		dst := v.Field(f.index)
		switch {
		case fd.IsMap():
			mm := val.Map()
			out := reflect.MakeMapWithSize(dst.Type(), mm.Len())
			kt, vt := dst.Type().Key(), dst.Type().Elem()
			mm.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				key, value := reflect.New(kt).Elem(), reflect.New(vt).Elem()
				if err = fromSingle(fd.MapKey(), k.Value(), key); err != nil {
					return false
				}
				if err = fromSingle(fd.MapValue(), mv, value); err != nil {
					return false
				}
				out.SetMapIndex(key, value)
				return true
			})
			dst.Set(out)
		case fd.IsList():
			l := val.List()
			out := reflect.MakeSlice(dst.Type(), l.Len(), l.Len())
			for i := range l.Len() {
				if err = fromSingle(fd, l.Get(i), out.Index(i)); err != nil {
					return false
				}
			}
			dst.Set(out)
		default:
			err = fromSingle(fd, val, dst)
		}
		return err == nil
	})
	return err
}

// fromSingle writes one proto value (not a list or map) into the settable Go value dst.
func fromSingle(fd protoreflect.FieldDescriptor, val protoreflect.Value, dst reflect.Value) error {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		dst.SetBool(val.Bool())
	case protoreflect.EnumKind:
		dst.SetInt(int64(val.Enum()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		dst.SetInt(val.Int())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		dst.SetUint(val.Uint())
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		dst.SetFloat(val.Float())
	case protoreflect.StringKind:
		dst.SetString(val.String())
	case protoreflect.BytesKind:
		dst.SetBytes(append([]byte(nil), val.Bytes()...))
	case protoreflect.MessageKind:
		nv := reflect.New(dst.Type().Elem())
		if pm, ok := nv.Interface().(proto.Message); ok { // a well-known type
			b, err := proto.Marshal(val.Message().Interface())
			if err == nil {
				err = proto.Unmarshal(b, pm)
			}
			if err != nil {
				return fmt.Errorf("field %s: %w", fd.Name(), err)
			}
		} else if err := fromMessage(val.Message(), nv.Elem()); err != nil {
			return fmt.Errorf("field %s: %w", fd.Name(), err)
		}
		dst.Set(nv)
	default:
		return fmt.Errorf("field %s: kind %s not supported", fd.Name(), fd.Kind())
	}
	return nil
}

// deepCopyInto is the generated DeepCopyInto: *out becomes a copy of *x sharing nothing with it.
func deepCopyInto[T Message](x, out T) {
	m, err := ToDynamic(x)
	if err == nil {
		err = FromDynamic(m, out)
	}
	if err != nil {
		// Only a generated type out of step with the embedded descriptors gets here, which
		// TestGeneratedCurrent rules out.
		panic("meshapi: " + err.Error())
	}
}
