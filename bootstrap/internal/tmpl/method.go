package tmpl

import (
	"fmt"
	"reflect"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

var protoMessageType = reflect.TypeFor[interface{ ProtoReflect() protoreflect.Message }]()

// method returns, as a function value, the method name of ptr when this executor supports it:
//   - String and Error, through fmt.Stringer and error;
//   - GetX on a generated protobuf message (a pointer to struct implementing ProtoReflect): the
//     getter of field X, or of oneof member X, with the generated getters' nil-safety (a nil
//     message or an unset oneof member gives the zero value).
//
// Looking methods up by name with reflect would make the linker keep every exported method of
// every type in the binary; these cover what templates over the bootstrap parameters call.
func method(ptr reflect.Value, name string) (reflect.Value, bool) {
	if !ptr.IsValid() {
		return reflect.Value{}, false
	}
	typ := ptr.Type()
	switch {
	case name == "String" && typ.Implements(stringerType) && ptr.Kind() != reflect.Interface:
		return reflect.ValueOf(func() string { return ptr.Interface().(fmt.Stringer).String() }), true
	case name == "Error" && typ.Implements(errorType) && ptr.Kind() != reflect.Interface:
		return reflect.ValueOf(func() string { return ptr.Interface().(error).Error() }), true
	case strings.HasPrefix(name, "Get") && len(name) > 3 && typ.Kind() == reflect.Pointer &&
		typ.Elem().Kind() == reflect.Struct && typ.Implements(protoMessageType):
		return protoGetter(ptr, name[3:])
	}
	return reflect.Value{}, false
}

// protoGetter returns a func() T reading field (or oneof member) field of the message ptr.
func protoGetter(ptr reflect.Value, field string) (reflect.Value, bool) {
	st := ptr.Type().Elem()
	if f, ok := st.FieldByName(field); ok && f.IsExported() && len(f.Index) == 1 {
		if _, oneof := f.Tag.Lookup("protobuf_oneof"); !oneof {
			ft := f.Type
			fn := reflect.MakeFunc(reflect.FuncOf(nil, []reflect.Type{ft}, false), func([]reflect.Value) []reflect.Value {
				if ptr.IsNil() {
					return []reflect.Value{reflect.Zero(ft)}
				}
				return []reflect.Value{ptr.Elem().Field(f.Index[0])}
			})
			return fn, true
		}
	}
	// A oneof member: the wrapper struct set in one of the message's oneof interface fields has a
	// field of that name.
	for i := range st.NumField() {
		f := st.Field(i)
		if _, oneof := f.Tag.Lookup("protobuf_oneof"); !oneof || ptr.IsNil() {
			continue
		}
		w := ptr.Elem().Field(i)
		if w.IsNil() {
			continue
		}
		wv := w.Elem() // *Wrapper
		if wv.Kind() != reflect.Pointer || wv.IsNil() || wv.Elem().Kind() != reflect.Struct {
			continue
		}
		if mf, ok := wv.Elem().Type().FieldByName(field); ok && mf.IsExported() {
			v := wv.Elem().FieldByIndex(mf.Index)
			return reflect.ValueOf(func() any { return v.Interface() }), true
		}
	}
	if zero, ok := oneofMemberZero(st, field); ok {
		// The member exists but is not the one set: its zero value, as the generated getter gives.
		return reflect.ValueOf(func() any { return zero.Interface() }), true
	}
	return reflect.Value{}, false
}

// oneofMemberZero returns the zero value of the Go type of the message type st's oneof member
// named field (Go names are protoc-gen-go's CamelCase of the proto field names).
func oneofMemberZero(st reflect.Type, field string) (reflect.Value, bool) {
	m, ok := reflect.New(st).Interface().(interface{ ProtoReflect() protoreflect.Message })
	if !ok {
		return reflect.Value{}, false
	}
	oneofs := m.ProtoReflect().Descriptor().Oneofs()
	for i := range oneofs.Len() {
		fields := oneofs.Get(i).Fields()
		for j := range fields.Len() {
			fd := fields.Get(j)
			if goCamelCase(string(fd.Name())) != field {
				continue
			}
			// The Go type of the member is that of a value of it: build one on a scratch message.
			scratch := m.ProtoReflect().New()
			var v any
			if fd.Message() != nil {
				v = scratch.NewField(fd).Message().Interface()
			} else {
				scratch.Set(fd, fd.Default())
				v = reflect.ValueOf(scratch.Interface()).Elem().FieldByName(st.Field(oneofIndex(st, oneofs.Get(i))).Name).
					Elem().Elem().FieldByName(field).Interface()
			}
			return reflect.Zero(reflect.TypeOf(v)), true
		}
	}
	return reflect.Value{}, false
}

// oneofIndex is the index of the struct field holding oneof od.
func oneofIndex(st reflect.Type, od protoreflect.OneofDescriptor) int {
	for i := range st.NumField() {
		if st.Field(i).Tag.Get("protobuf_oneof") == string(od.Name()) {
			return i
		}
	}
	return -1
}

// goCamelCase is protoc-gen-go's Go name for a proto field name.
func goCamelCase(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.' && i+1 < len(s) && isASCIILower(s[i+1]):
		case c == '.':
			b = append(b, '_')
		case c == '_' && (i == 0 || s[i-1] == '.'):
			b = append(b, 'X')
		case c == '_' && i+1 < len(s) && isASCIILower(s[i+1]):
		case isASCIIDigit(c):
			b = append(b, c)
		default:
			if isASCIILower(c) {
				c -= 'a' - 'A'
			}
			b = append(b, c)
			for ; i+1 < len(s) && isASCIILower(s[i+1]); i++ {
				b = append(b, s[i+1])
			}
		}
	}
	return string(b)
}

func isASCIILower(c byte) bool { return 'a' <= c && c <= 'z' }
func isASCIIDigit(c byte) bool { return '0' <= c && c <= '9' }
