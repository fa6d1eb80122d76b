package proxyconfig

import (
	"encoding/json"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// unknownFields lists the dotted paths of the keys in the JSON document js that name no field of
// md (by JSON or proto name), descending into nested messages, lists and maps of messages, so
// that the warning for a tolerated unknown field names every one of them (protojson names only
// the first). Well-known types (Duration, wrappers, Struct) are not descended into.
func unknownFields(js []byte, md protoreflect.MessageDescriptor) []string {
	var out []string
	var doc any
	if json.Unmarshal(js, &doc) != nil {
		return nil
	}
	walkUnknown(doc, md, "", &out)
	sort.Strings(out)
	return out
}

func walkUnknown(v any, md protoreflect.MessageDescriptor, prefix string, out *[]string) {
	obj, ok := v.(map[string]any)
	if !ok || strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return
	}
	fields := md.Fields()
	for k, val := range obj {
		fd := fields.ByJSONName(k)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(k))
		}
		if fd == nil {
			*out = append(*out, prefix+k)
			continue
		}
		path := prefix + k + "."
		switch {
		case fd.IsMap():
			if vd := fd.MapValue(); vd.Kind() == protoreflect.MessageKind {
				if m, ok := val.(map[string]any); ok {
					for mk, mv := range m {
						walkUnknown(mv, vd.Message(), prefix+k+"["+mk+"].", out)
					}
				}
			}
		case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
		case fd.IsList():
			if list, ok := val.([]any); ok {
				for _, item := range list {
					walkUnknown(item, fd.Message(), path, out)
				}
			}
		default:
			walkUnknown(val, fd.Message(), path, out)
		}
	}
}
