package meshapi

import (
	"reflect"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
)

// MarshalProtoJSON writes x in the protobuf JSON mapping (protojson: lowerCamel names, enum names,
// unset fields omitted): the bytes protojson.Marshal writes for x, compacted. It runs the
// generated writer (AppendProtoJSON), which needs no descriptors.
func MarshalProtoJSON(x Message) ([]byte, error) {
	b, err := AppendProtoJSON(make([]byte, 0, 512), x)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// UnmarshalProtoJSON replaces *x with the JSON document b, read with opts.
func UnmarshalProtoJSON(b []byte, x Message, opts protojson.UnmarshalOptions) error {
	m, err := NewDynamic(x.protoName())
	if err != nil {
		return err
	}
	if err := opts.Unmarshal(b, m); err != nil {
		return err
	}
	return FromDynamic(m, x)
}

// marshalJSON is the generated types' MarshalJSON: istio.io/api's types write themselves with
// github.com/golang/protobuf's jsonpb.Marshaler{} (lowerCamel names, enum names, defaults
// omitted), which is protojson's mapping.
func marshalJSON(x Message) ([]byte, error) { return MarshalProtoJSON(x) }

// unmarshalJSON is the generated types' UnmarshalJSON: istio.io/api's use
// jsonpb.Unmarshaler{AllowUnknownFields: true}.
func unmarshalJSON(b []byte, x Message) error {
	return UnmarshalProtoJSON(b, x, protojson.UnmarshalOptions{DiscardUnknown: true})
}

// textString is the generated types' String: the one-line protobuf text format, as
// protoc-gen-go's String gives it. A nil message prints as fmt prints Istio's (whose String
// panics on nil, which fmt reports as "<nil>").
func textString(x Message) string {
	if reflect.ValueOf(x).IsNil() {
		return "<nil>"
	}
	m, err := ToDynamic(x)
	if err != nil {
		return "meshapi: " + err.Error()
	}
	return prototext.MarshalOptions{}.Format(m)
}
