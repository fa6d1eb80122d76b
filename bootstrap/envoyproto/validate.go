package envoyproto

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Finding is one problem Envoy would refuse the bootstrap for, at a JSON field path.
type Finding struct {
	Path    string // e.g. static_resources.clusters[3].load_assignment
	Message string
}

func (f Finding) String() string { return f.Path + ": " + f.Message }

// Validate catches, without Envoy, what Envoy's --mode validate would for a bootstrap:
//   - strict parse into config.bootstrap.v3.Bootstrap (unknown fields, wrong JSON types, unknown
//     typed_config types), each finding at its field path;
//   - Envoy's field rules (PGV ValidateAll) when the binary is built without disable_pgv;
//   - references Envoy resolves at start: every cluster named by a gRPC service (ADS, SDS, metrics
//     service, access log service) or a tracer's collector_cluster must be a static cluster, and
//     static cluster names must be unique.
//
// An empty result means clean.
func Validate(bootstrapJSON []byte) []Finding {
	var doc any
	if err := json.Unmarshal(bootstrapJSON, &doc); err != nil {
		return []Finding{{Path: "", Message: "not JSON: " + err.Error()}}
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return []Finding{{Path: "", Message: "bootstrap must be a JSON object"}}
	}
	reg, err := loadRegistry()
	if err != nil {
		return []Finding{{Path: "", Message: err.Error()}}
	}
	return reg.validate(bootstrapJSON, top)
}

// validate is Validate with the registry given, for the parsed JSON object top.
func (reg *registry) validate(bootstrapJSON []byte, top map[string]any) []Finding {
	var out []Finding
	var unwrapped bool
	w := walker{types: reg.types, add: func(p, m string) { out = append(out, Finding{Path: p, Message: m}) }, unwrapped: &unwrapped}
	w.message("", top, reg.bootstrap)
	if unwrapped {
		b, err := json.Marshal(top)
		if err != nil {
			return append(out, Finding{Path: "", Message: err.Error()})
		}
		bootstrapJSON = b
	}

	b := reg.newBootstrap()
	if err := (protojson.UnmarshalOptions{Resolver: reg.types}).Unmarshal(bootstrapJSON, b); err != nil {
		if len(out) == 0 { // the walker missed it; still report Envoy's parse error
			out = append(out, Finding{Path: "", Message: err.Error()})
		}
		return out
	}
	out = append(out, fieldRules(b)...)
	out = append(out, references(top)...)
	return out
}

// walker compares a JSON tree with a message descriptor to name the path of unknown fields and
// wrongly typed values (protojson reports only the first, by line and column).
type walker struct {
	types interface {
		FindMessageByURL(url string) (protoreflect.MessageType, error)
	}
	add func(path, msg string)
	// unwrapped is set when a wrapper's object form was replaced by its bare value in the tree
	// (protojson, which checks the rest, takes only the bare form).
	unwrapped *bool
}

func (w walker) message(path string, obj map[string]any, md protoreflect.MessageDescriptor) {
	switch md.FullName() {
	case "google.protobuf.Any":
		w.anyMessage(path, obj)
		return
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		return
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(k))
		}
		p := join(path, k)
		if fd == nil {
			w.add(p, fmt.Sprintf("unknown field %q in %s", k, md.FullName()))
			continue
		}
		w.field(p, obj[k], fd)
		if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() && wrapperValue(fd.Message()) != nil {
			if o, ok := obj[k].(map[string]any); ok && len(o) == 1 {
				if inner, ok := o["value"]; ok {
					obj[k] = inner
					*w.unwrapped = true
				}
			}
		}
	}
}

func (w walker) anyMessage(path string, obj map[string]any) {
	url, _ := obj["@type"].(string)
	if url == "" {
		w.add(join(path, "@type"), "typed config without @type")
		return
	}
	mt, err := w.types.FindMessageByURL(url)
	if err != nil {
		w.add(join(path, "@type"), fmt.Sprintf("unknown type %q (not an extension this validator knows)", url))
		return
	}
	md := mt.Descriptor()
	if isWKT(md) { // {"@type": ..., "value": ...}
		return
	}
	rest := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "@type" {
			rest[k] = v
		}
	}
	w.message(path, rest, md)
	for k, v := range rest { // wrappers unwrapped in the copy
		obj[k] = v
	}
}

func (w walker) field(path string, v any, fd protoreflect.FieldDescriptor) {
	if v == nil {
		return // null means unset
	}
	switch {
	case fd.IsMap():
		m, ok := v.(map[string]any)
		if !ok {
			w.add(path, "want an object (map)")
			return
		}
		for k, e := range m {
			w.single(path+"["+strconv.Quote(k)+"]", e, fd.MapValue())
		}
	case fd.IsList():
		l, ok := v.([]any)
		if !ok {
			w.add(path, "want a list")
			return
		}
		for i, e := range l {
			w.single(path+"["+strconv.Itoa(i)+"]", e, fd)
		}
	default:
		w.single(path, v, fd)
	}
}

func (w walker) single(path string, v any, fd protoreflect.FieldDescriptor) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		md := fd.Message()
		if inner := wrapperValue(md); inner != nil {
			// A wrapper is written as its bare value, or as an object holding only "value":
			// Envoy parses with protobuf's JsonStreamToMessage, which sets allow_legacy_syntax
			// (json.cc), and the parser then takes a wrapper's object form (parser.cc,
			// ParseMessage). Istio's keepaliveConverter writes that form.
			if obj, ok := v.(map[string]any); ok {
				if inner, ok := obj["value"]; !ok || len(obj) != 1 {
					w.add(path, fmt.Sprintf("want a %s: a bare value or {\"value\": ...}", md.FullName()))
				} else {
					w.single(path+".value", inner, wrapperValue(md))
				}
				return
			}
			w.single(path, v, inner)
			return
		}
		if isWKT(md) && md.FullName() != "google.protobuf.Any" {
			return // durations, structs: protojson checks their forms
		}
		obj, ok := v.(map[string]any)
		if !ok {
			w.add(path, fmt.Sprintf("want an object (%s)", md.FullName()))
			return
		}
		w.message(path, obj, md)
	case protoreflect.BoolKind:
		if _, ok := v.(bool); !ok {
			w.add(path, "want a bool")
		}
	case protoreflect.StringKind, protoreflect.BytesKind:
		if _, ok := v.(string); !ok {
			w.add(path, "want a string")
		}
	case protoreflect.EnumKind:
		switch e := v.(type) {
		case string:
			if fd.Enum().Values().ByName(protoreflect.Name(e)) == nil {
				w.add(path, fmt.Sprintf("%q is not a value of %s", e, fd.Enum().FullName()))
			}
		case float64:
		default:
			w.add(path, "want an enum name")
		}
	default: // numbers: JSON numbers or numeric strings
		switch n := v.(type) {
		case float64:
		case string:
			if _, err := strconv.ParseFloat(n, 64); err != nil {
				w.add(path, fmt.Sprintf("want a number, got %q", n))
			}
		default:
			w.add(path, "want a number")
		}
	}
}

func isWKT(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// wrapperValue returns the value field of a google.protobuf wrapper type, else nil.
func wrapperValue(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	switch md.FullName() {
	case "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue",
		"google.protobuf.Int32Value", "google.protobuf.Int64Value", "google.protobuf.UInt32Value",
		"google.protobuf.UInt64Value", "google.protobuf.FloatValue", "google.protobuf.DoubleValue":
		return md.Fields().ByName("value")
	}
	return nil
}
