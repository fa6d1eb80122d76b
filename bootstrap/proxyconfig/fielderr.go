package proxyconfig

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// fieldError is a document protojson refused, told as the path of the field whose value it
// refused (tracing.zipkin.address, proxyMetadata[KEY], extraStatTags[2]) and that value.
// protojson's own error gives a line and column of the JSON the YAML was converted to, which
// the user never saw, and names the field only by its last element, if at all.
type fieldError struct {
	path  string
	value json.RawMessage
	want  string
}

func (e *fieldError) Error() string {
	v := string(e.value)
	if len(v) > 80 {
		v = v[:77] + "..."
	}
	return fmt.Sprintf("%s: invalid value %s for %s", e.path, v, e.want)
}

var jsonPosition = regexp.MustCompile(`\(line \d+:\d+\): `)

// explain turns protojson's error for js (a document of message md that protojson refused
// with opts) into one naming the field: it finds the deepest field whose value alone is
// refused. When no single field is (a oneof set twice, duplicate keys), it returns protojson's
// error without the converted JSON's position.
func explain(js []byte, md protoreflect.MessageDescriptor, opts protojson.UnmarshalOptions, err error) error {
	if fe := locate(js, md, opts, ""); fe != nil {
		return fe
	}
	return fmt.Errorf("%s", jsonPosition.ReplaceAllString(err.Error(), ""))
}

// locate returns the field of message md under path whose value in js is refused, or nil.
func locate(js []byte, md protoreflect.MessageDescriptor, opts protojson.UnmarshalOptions, path string) *fieldError {
	var obj map[string]json.RawMessage
	if json.Unmarshal(js, &obj) != nil {
		return nil // not an object: protojson's error says so
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same document always names the same field
	for _, k := range keys {
		fields := md.Fields()
		fd := fields.ByJSONName(k)
		if fd == nil {
			fd = fields.ByTextName(k)
		}
		if fd == nil {
			continue // unknown: tolerated (or reported as such by the caller)
		}
		v := obj[k]
		one, _ := json.Marshal(map[string]json.RawMessage{k: v})
		if opts.Unmarshal(one, dynamicpb.NewMessage(md)) == nil {
			continue
		}
		p := join(path, k)
		if fe := locateValue(v, fd, opts, p); fe != nil {
			return fe
		}
		return &fieldError{path: p, value: v, want: typeName(fd)}
	}
	return nil
}

// locateValue looks inside v, the refused value of field fd, for a deeper refused field or
// element.
func locateValue(v json.RawMessage, fd protoreflect.FieldDescriptor, opts protojson.UnmarshalOptions, path string) *fieldError {
	// alone reports whether field fd holding only x (a list of one element, a map of one entry)
	// is accepted.
	alone := func(x json.RawMessage) bool {
		doc, _ := json.Marshal(map[string]json.RawMessage{fd.JSONName(): x})
		return opts.Unmarshal(doc, dynamicpb.NewMessage(fd.ContainingMessage())) == nil
	}
	switch {
	case fd.IsMap():
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) != nil {
			return nil
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			entry, _ := json.Marshal(map[string]json.RawMessage{k: m[k]})
			if !alone(entry) {
				return element(m[k], fd.MapValue(), opts, path+"["+k+"]")
			}
		}
	case fd.IsList():
		var l []json.RawMessage
		if json.Unmarshal(v, &l) != nil {
			return nil
		}
		for i, e := range l {
			if !alone(json.RawMessage("[" + string(e) + "]")) {
				return element(e, fd, opts, path+"["+strconv.Itoa(i)+"]")
			}
		}
	case fd.Message() != nil && !wellKnown(fd.Message()):
		return locate(v, fd.Message(), opts, path)
	}
	return nil
}

// element is the error for v, a refused element of fd's type at path: a deeper field of it
// when one is refused alone.
func element(v json.RawMessage, fd protoreflect.FieldDescriptor, opts protojson.UnmarshalOptions, path string) *fieldError {
	if fd.Message() != nil && !wellKnown(fd.Message()) {
		if fe := locate(v, fd.Message(), opts, path); fe != nil {
			return fe
		}
	}
	return &fieldError{path: path, value: v, want: elemTypeName(fd)}
}

func wellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile() != nil && md.ParentFile().Package() == "google.protobuf"
}

// typeName is what field fd holds: int32, string, google.protobuf.Duration, enum
// istio.mesh.v1alpha1.ProxyConfig.InboundInterceptionMode, repeated string, map<string, string>.
func typeName(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "map<" + elemTypeName(fd.MapKey()) + ", " + elemTypeName(fd.MapValue()) + ">"
	case fd.IsList():
		return "repeated " + elemTypeName(fd)
	}
	return elemTypeName(fd)
}

func elemTypeName(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.Enum() != nil:
		return "enum " + string(fd.Enum().FullName())
	case fd.Message() != nil:
		if w, ok := wrapperOf[fd.Message().FullName()]; ok {
			return w // a wrapper is written as the value it wraps
		}
		return string(fd.Message().FullName())
	}
	return fd.Kind().String()
}

var wrapperOf = map[protoreflect.FullName]string{
	"google.protobuf.Int32Value": "int32", "google.protobuf.UInt32Value": "uint32",
	"google.protobuf.Int64Value": "int64", "google.protobuf.UInt64Value": "uint64",
	"google.protobuf.FloatValue": "float", "google.protobuf.DoubleValue": "double",
	"google.protobuf.BoolValue": "bool", "google.protobuf.StringValue": "string",
	"google.protobuf.BytesValue": "bytes",
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
