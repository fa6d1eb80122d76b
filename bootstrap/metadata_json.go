package bootstrap

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// metadataField is one typed key of Metadata: its JSON name and a pointer to its field.
type metadataField struct {
	name string
	ptr  func(m *Metadata) any
}

// metadataFieldTable, Metadata's typed keys sorted by name, is generated from its json tags
// into json.gen.go (`go generate ./bootstrap`); TestMetadataFieldTable checks it too.

// appendMetadataValue writes the member name: value for the field p points to, unless the
// field is empty (every typed key is omitempty), and reports whether it wrote it. Values are
// encoded as encoding/json encodes the field (the types' MarshalJSON methods included).
func appendMetadataValue(w *jsonWriter, name string, p any) bool {
	switch p := p.(type) {
	case *string:
		if *p == "" {
			return false
		}
		w.field(name)
		w.str(*p)
	case *int:
		if *p == 0 {
			return false
		}
		w.field(name)
		w.int(int64(*p))
	case *map[string]string:
		if len(*p) == 0 {
			return false
		}
		w.field(name)
		w.mapString(*p)
	case *[]string:
		if len(*p) == 0 {
			return false
		}
		w.field(name)
		w.strings(*p)
	case *StringBool:
		if !*p {
			return false
		}
		w.field(name)
		p.appendJSON(w)
	case **StringBool:
		if *p == nil {
			return false
		}
		w.field(name)
		(*p).appendJSON(w)
	case *StringList:
		if len(*p) == 0 {
			return false
		}
		w.field(name)
		w.str(strings.Join(*p, ","))
	case *PodPortList:
		if len(*p) == 0 {
			return false
		}
		w.field(name)
		p.appendJSON(w)
	case **ProxyConfigJSON:
		if *p == nil {
			return false
		}
		w.field(name)
		w.marshaler(**p)
	default:
		panic(fmt.Sprintf("bootstrap: metadata key %s: no JSON rule for %T", name, p))
	}
	return true
}

// appendJSON writes the metadata as MarshalJSON returns it (see there), into w's layout.
func (m *Metadata) appendJSON(w *jsonWriter) {
	if m == nil {
		w.null()
		return
	}
	raw := make([]string, 0, len(m.Raw))
	for k := range m.Raw {
		raw = append(raw, k)
	}
	slices.Sort(raw)
	writeRaw := func(k string) {
		w.key(k)
		if w.value(m.Raw[k]); w.err != nil {
			w.err = fmt.Errorf("metadata key %s: %w", k, w.err)
		}
	}
	w.beginObject()
	// Merge the two sorted key lists; on a tie the typed field wins when it is set.
	typed := metadataFieldTable[:]
	for len(typed) > 0 || len(raw) > 0 {
		switch {
		case len(raw) == 0 || len(typed) > 0 && typed[0].name < raw[0]:
			appendMetadataValue(w, typed[0].name, typed[0].ptr(m))
			typed = typed[1:]
		case len(typed) == 0 || raw[0] < typed[0].name:
			writeRaw(raw[0])
			raw = raw[1:]
		default:
			if !appendMetadataValue(w, typed[0].name, typed[0].ptr(m)) {
				writeRaw(raw[0])
			}
			typed, raw = typed[1:], raw[1:]
		}
		if w.err != nil {
			return
		}
	}
	w.endObject()
}

// appendJSON writes "true" or "false", as MarshalJSON does.
func (s *StringBool) appendJSON(w *jsonWriter) {
	if s == nil {
		w.null()
		return
	}
	w.buf = append(w.buf, '"')
	w.bool(bool(*s))
	w.buf = append(w.buf, '"')
}

// appendJSON writes the ports as MarshalJSON does: a JSON string holding the compact array.
func (l *PodPortList) appendJSON(w *jsonWriter) {
	if l == nil {
		w.null()
		return
	}
	if *l == nil {
		w.str("null")
		return
	}
	inner := jsonWriter{}
	inner.beginArray()
	for _, p := range *l {
		inner.elem()
		inner.beginObject()
		inner.strField("name", p.Name, true)
		inner.field("containerPort")
		inner.int(int64(p.ContainerPort))
		inner.strField("protocol", p.Protocol, true)
		inner.endObject()
	}
	inner.endArray()
	w.str(string(inner.buf))
}

// setKey sets the typed field of metadata key k from its value v as
// json.Unmarshal(json.Marshal(map[string]any{k: v}), (*metadataFields)(m)) would, without
// building encoding/json's field cache of the 56-field struct: the field is found by exact
// name, else case-insensitively (strings.EqualFold, as encoding/json's folding); a key naming
// no field is ignored. A string value (every ISTIO_META_ variable) is set directly: invalid
// UTF-8 becomes U+FFFD byte by byte as the JSON round trip makes it, and the Unmarshaler types
// get the encoded string as encoding/json hands it to them. Any other value is decoded into the
// one field with json.Unmarshal, which keeps every rule of the round trip (null, merging into
// an existing map, type errors) and caches nothing for a non-struct field.
func (m *Metadata) setKey(k string, v any) error {
	w := jsonWriter{}
	w.value(v)
	if w.err != nil { // a value JSON cannot hold fails the round trip whatever its key
		return w.err
	}
	f := findMetadataField(k)
	if f == nil {
		return nil
	}
	p := f.ptr(m)
	if s, ok := v.(string); ok {
		switch p := p.(type) {
		case *string:
			*p = validUTF8(s)
			return nil
		case *StringBool:
			return p.UnmarshalJSON(w.buf)
		case **StringBool:
			if *p == nil {
				*p = new(StringBool)
			}
			return (*p).UnmarshalJSON(w.buf)
		case *StringList:
			if s == "" {
				*p = nil
			} else {
				*p = strings.Split(validUTF8(s), ",")
			}
			return nil
		case *PodPortList:
			return p.UnmarshalJSON(w.buf)
		}
	}
	return json.Unmarshal(w.buf, p)
}

// findMetadataField is the typed key named k: exactly, else ignoring case.
func findMetadataField(k string) *metadataField {
	if i, ok := slices.BinarySearchFunc(metadataFieldTable[:], k, func(f metadataField, k string) int {
		return strings.Compare(f.name, k)
	}); ok {
		return &metadataFieldTable[i]
	}
	for i := range metadataFieldTable {
		if strings.EqualFold(metadataFieldTable[i].name, k) {
			return &metadataFieldTable[i]
		}
	}
	return nil
}

// validUTF8 replaces each byte of s that is not part of valid UTF-8 by U+FFFD, as a JSON
// encode and decode round trip does (strings.ToValidUTF8 would merge runs into one).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}
