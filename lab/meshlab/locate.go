package meshlab

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// locate finds the deepest field of obj that does not decode as md: protojson reports the
// offset in the re-encoded JSON, which means nothing to someone editing YAML, so each field
// is tried on its own and the search descends into the first one that fails. It returns the
// dotted path (proto names, [i] for list elements, [key] for map entries) and the error at
// that field; ("", nil) when no single field fails (e.g. two members of one oneof are set).
func locate(md protoreflect.MessageDescriptor, obj map[string]any, path string) (string, error) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(key))
		}
		if fd == nil {
			return join(path, key), fmt.Errorf("unknown field (%s has no field %q)", md.FullName(), key)
		}
		val := obj[key]
		err := tryField(md, key, val)
		if err == nil {
			continue
		}
		p := join(path, string(fd.Name()))
		if f, ferr := descend(fd, md, key, val, p); ferr != nil {
			return f, ferr
		}
		return p, cleanProtoErr(err)
	}
	return "", nil
}

// descend narrows an error in field fd (whose value is val) to an element or a nested field.
func descend(fd protoreflect.FieldDescriptor, parent protoreflect.MessageDescriptor, key string, val any, p string) (string, error) {
	switch {
	case fd.IsMap():
		m, ok := val.(map[string]any)
		if !ok {
			return "", nil
		}
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			err := tryField(parent, key, map[string]any{k: m[k]})
			if err == nil {
				continue
			}
			ep := p + "[" + k + "]"
			if f, ferr := intoMessage(fd.MapValue(), m[k], ep); ferr != nil {
				return f, ferr
			}
			return ep, cleanProtoErr(err)
		}
	case fd.IsList():
		l, ok := val.([]any)
		if !ok {
			return "", nil
		}
		for i, e := range l {
			err := tryField(parent, key, []any{e})
			if err == nil {
				continue
			}
			ep := p + "[" + strconv.Itoa(i) + "]"
			if f, ferr := intoMessage(fd, e, ep); ferr != nil {
				return f, ferr
			}
			return ep, cleanProtoErr(err)
		}
	default:
		return intoMessage(fd, val, p)
	}
	return "", nil
}

// intoMessage descends into a message-typed value (and into an Any's "@type" message).
func intoMessage(fd protoreflect.FieldDescriptor, val any, p string) (string, error) {
	if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
		return "", nil
	}
	obj, ok := val.(map[string]any)
	if !ok {
		return "", nil
	}
	md := fd.Message()
	if md.FullName() == "google.protobuf.Any" {
		url, _ := obj["@type"].(string)
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
		if err != nil {
			return join(p, "@type"), fmt.Errorf("type %q is not known to meshlab", url)
		}
		inner := make(map[string]any, len(obj))
		for k, v := range obj {
			if k != "@type" {
				inner[k] = v
			}
		}
		return locate(mt.Descriptor(), inner, p)
	}
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return "", nil // well-known types have their own JSON forms
	}
	return locate(md, obj, p)
}

// tryField decodes {key: val} alone as md.
func tryField(md protoreflect.MessageDescriptor, key string, val any) error {
	b, err := json.Marshal(map[string]any{key: val})
	if err != nil {
		return err
	}
	return protojson.Unmarshal(b, dynamicpb.NewMessage(md))
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// protoErrPrefix is protojson's position prefix, meaningless for a single re-encoded field.
var protoErrPrefix = regexp.MustCompile(`^proto:\s*(\(line \d+:\d+\):\s*)?`)

// cleanProtoErr drops protojson's position prefix from err's text.
func cleanProtoErr(err error) error {
	s := strings.ReplaceAll(err.Error(), "\u00a0", " ") // protojson uses non-breaking spaces to discourage matching
	return errors.New(protoErrPrefix.ReplaceAllString(s, ""))
}
