package bootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/wingman-mesh/wingman/internal/jsonstr"
)

// jsonWriter appends JSON to a byte slice without reflection, byte for byte as encoding/json's
// Marshal (compact) or MarshalIndent(v, "", "  ") (indent) writes the same values: the bootstrap
// types' appendJSON methods drive it so that the start-up render builds no encoding/json type
// caches (BenchmarkRenderCold: a first render 1.8 -> 1.1 ms, 128 KB less heap kept for good).
//
// How each rule was established: encoding/json's documentation (omitempty, sorted map keys,
// HTML-safe string escaping, RawMessage and Marshaler output compacted) and its source
// (encode.go, indent.go: the escape forms, the float format, the indentation of empty objects);
// jsonw_test.go checks every rule against encoding/json itself, on the goldens' inputs, random
// values and fuzzed input.
//
// The small helpers (begin/end, field, key, null, scalars, the *Field helpers) are go:noinline:
// inlined into the ~60 appendJSON methods they made the stripped pilot-agent 70 KB larger
// (measured), for nothing worth having on a path run once per start.
//
// Not safe for concurrent use. The first error sticks in err; what is written after it is
// garbage and the callers drop it.
type jsonWriter struct {
	buf    []byte
	indent bool // MarshalIndent layout with a two-space indent; else compact
	depth  int  // open objects and arrays
	empty  bool // the innermost open object or array has no member yet
	err    error

	// reflected counts values handed to encoding/json (see value); the tests require 0.
	reflected int
}

// fail records the first error.
func (w *jsonWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

//go:noinline
func (w *jsonWriter) newline() {
	if w.indent {
		w.buf = appendNewline(w.buf, w.depth)
	}
}

// appendNewline appends a line break and depth two-space indents.
func appendNewline(b []byte, depth int) []byte {
	const spaces = "\n                                                                "
	b = append(b, spaces[:1+min(2*depth, len(spaces)-1)]...)
	for range depth - (len(spaces)-1)/2 {
		b = append(b, ' ', ' ')
	}
	return b
}

//go:noinline
func (w *jsonWriter) beginObject() {
	w.buf = append(w.buf, '{')
	w.depth++
	w.empty = true
}

//go:noinline
func (w *jsonWriter) endObject() { w.end('}') }

//go:noinline
func (w *jsonWriter) beginArray() {
	w.buf = append(w.buf, '[')
	w.depth++
	w.empty = true
}

//go:noinline
func (w *jsonWriter) endArray() { w.end(']') }

// end closes the innermost object or array; an empty one stays "{}" or "[]" as json.Indent
// leaves it. Once closed it is a value, so the container around it is no longer empty.
//
//go:noinline
func (w *jsonWriter) end(c byte) {
	w.depth--
	if !w.empty {
		w.newline()
	}
	w.buf = append(w.buf, c)
	w.empty = false
}

// sep starts a member: the comma after the previous one, then the line break and indent.
//
//go:noinline
func (w *jsonWriter) sep() {
	if !w.empty {
		w.buf = append(w.buf, ',')
	}
	w.empty = false
	w.newline()
}

// elem starts an array element.
//
//go:noinline
func (w *jsonWriter) elem() { w.sep() }

// field starts an object member whose name needs no escaping (a struct field's JSON name).
//
//go:noinline
func (w *jsonWriter) field(name string) {
	w.sep()
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, '"', ':')
	if w.indent {
		w.buf = append(w.buf, ' ')
	}
}

// key starts an object member with an arbitrary name (a map key), escaped as a string.
//
//go:noinline
func (w *jsonWriter) key(k string) {
	w.sep()
	w.str(k)
	w.buf = append(w.buf, ':')
	if w.indent {
		w.buf = append(w.buf, ' ')
	}
}

//go:noinline
func (w *jsonWriter) null() { w.buf = append(w.buf, "null"...) }

//go:noinline
func (w *jsonWriter) bool(b bool) { w.buf = strconv.AppendBool(w.buf, b) }

//go:noinline
func (w *jsonWriter) int(i int64) { w.buf = strconv.AppendInt(w.buf, i, 10) }

//go:noinline
func (w *jsonWriter) uint(u uint64) { w.buf = strconv.AppendUint(w.buf, u, 10) }

// float writes f as encoding/json does (the ES6 number format): shortest round-trip digits,
// exponent form below 1e-6 and from 1e21 on, with a one-digit negative exponent unpadded.
// NaN and infinities are not JSON: an error, as json.Marshal's UnsupportedValueError.
func (w *jsonWriter) float(f float64, bits int) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		w.fail(fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, bits)))
		return
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 {
		if bits == 64 && (a < 1e-6 || a >= 1e21) || bits == 32 && (float32(a) < 1e-6 || float32(a) >= 1e21) {
			format = 'e'
		}
	}
	w.buf = strconv.AppendFloat(w.buf, f, format, -1, bits)
	if format == 'e' { // e-07 -> e-7
		n := len(w.buf)
		if n >= 4 && w.buf[n-4] == 'e' && w.buf[n-3] == '-' && w.buf[n-2] == '0' {
			w.buf[n-2] = w.buf[n-1]
			w.buf = w.buf[:n-1]
		}
	}
}

// str writes s as a JSON string the way encoding/json does with HTML escaping on: ", \ and
// control characters escaped (\b \f \n \r \t short, the rest \u00XX), <, > and & as \u003c
// \u003e \u0026, U+2028 and U+2029 as \u2028 \u2029, and invalid UTF-8 as \ufffd.
func (w *jsonWriter) str(s string) { w.buf = jsonstr.AppendString(w.buf, s, true) }

// errInvalidRaw is the error for a RawMessage or MarshalJSON result that is not JSON.
var errInvalidRaw = errors.New("json: invalid raw JSON value")

// raw writes an already encoded JSON value as encoding/json embeds a RawMessage or a
// MarshalJSON result: checked to be valid JSON (the same scanner, json.Valid), whitespace
// dropped, <, >, & and U+2028/U+2029 escaped inside strings, then laid out as json.Indent lays
// out the whole document. A nil value is null, as RawMessage.MarshalJSON makes it.
func (w *jsonWriter) raw(v []byte) {
	if v == nil {
		w.null()
		return
	}
	if !json.Valid(v) {
		w.fail(errInvalidRaw)
		return
	}
	b := w.buf
	depth := w.depth
	newline := func(b []byte) []byte {
		if !w.indent {
			return b
		}
		return appendNewline(b, depth)
	}
	inString, escaped, open := false, false, false // open: after { or [, nothing yet
	for i := 0; i < len(v); i++ {
		c := v[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			case c == '<' || c == '>' || c == '&':
				b = jsonstr.AppendEscapedASCII(b, c)
				continue
			case c == 0xE2 && i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8: // U+2028, U+2029
				b = jsonstr.AppendLineSeparator(b, v[i+2]&0xf)
				i += 2
				continue
			}
			b = append(b, c)
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if open && c != '}' && c != ']' {
			open = false
			depth++
			b = newline(b)
		}
		switch c {
		case '"':
			inString = true
			b = append(b, c)
		case '{', '[':
			open = true
			b = append(b, c)
		case ',':
			b = append(b, c)
			b = newline(b)
		case ':':
			b = append(b, c)
			if w.indent {
				b = append(b, ' ')
			}
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				b = newline(b)
			}
			b = append(b, c)
		default:
			b = append(b, c)
		}
	}
	w.buf = b
}

// marshaler writes a json.Marshaler's output as encoding/json embeds it.
func (w *jsonWriter) marshaler(m json.Marshaler) {
	b, err := m.MarshalJSON()
	if err != nil {
		w.fail(fmt.Errorf("json: error calling MarshalJSON for type %T: %w", m, err))
		return
	}
	w.raw(b)
}

// jsonAppender is implemented by the types that write themselves with a jsonWriter.
type jsonAppender interface {
	appendJSON(w *jsonWriter)
}

// value writes a dynamically typed value: the JSON-shaped types the render builds (maps, slices,
// scalars, the package's own types) without reflection. Anything else is marshalled by
// encoding/json and embedded, so the bytes stay the same whatever the value; w.reflected
// counts those, and the tests require none on the render paths.
func (w *jsonWriter) value(v any) {
	switch v := v.(type) {
	case nil:
		w.null()
	case string:
		w.str(v)
	case bool:
		w.bool(v)
	case int:
		w.int(int64(v))
	case int64:
		w.int(v)
	case int32:
		w.int(int64(v))
	case uint32:
		w.uint(uint64(v))
	case uint64:
		w.uint(v)
	case float64:
		w.float(v, 64)
	case float32:
		w.float(float64(v), 32)
	case map[string]any:
		w.mapAny(v)
	case map[string]string:
		w.mapString(v)
	case []any:
		if v == nil {
			w.null()
			return
		}
		w.beginArray()
		for _, e := range v {
			w.elem()
			w.value(e)
		}
		w.endArray()
	case []string:
		w.strings(v)
	case json.RawMessage:
		w.raw(v)
	case HTTPConnectionManager:
		v.appendJSON(w)
	case TypedStruct:
		v.appendJSON(w)
	case jsonAppender: // the package's pointer types; each writes null for a nil pointer
		v.appendJSON(w)
	case json.Marshaler:
		w.marshaler(v)
	default:
		w.reflected++
		b, err := json.Marshal(v)
		if err != nil {
			w.fail(err)
			return
		}
		w.raw(b)
	}
}

// strings writes a []string; nil is null.
func (w *jsonWriter) strings(v []string) {
	if v == nil {
		w.null()
		return
	}
	w.beginArray()
	for _, s := range v {
		w.elem()
		w.str(s)
	}
	w.endArray()
}

// mapAny writes a map with its keys sorted, as encoding/json does; nil is null.
func (w *jsonWriter) mapAny(m map[string]any) {
	if m == nil {
		w.null()
		return
	}
	w.beginObject()
	for _, k := range sortedMapKeys(m) {
		w.key(k)
		w.value(m[k])
	}
	w.endObject()
}

// mapString writes a map[string]string with its keys sorted; nil is null.
func (w *jsonWriter) mapString(m map[string]string) {
	if m == nil {
		w.null()
		return
	}
	w.beginObject()
	for _, k := range sortedMapKeys(m) {
		w.key(k)
		w.str(m[k])
	}
	w.endObject()
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendIndented returns v written as json.MarshalIndent(v, "", "  ") writes it, plus a newline.
func appendIndented(buf []byte, v jsonAppender) ([]byte, error) {
	w := jsonWriter{buf: buf, indent: true}
	v.appendJSON(&w)
	if w.err != nil {
		return nil, w.err
	}
	return append(w.buf, '\n'), nil
}

// The helpers below are what the generated appendJSON methods (json.gen.go, written by
// internal/jsongen from the struct tags of envoy.go and grpc.go) call.

// appendSlice writes s as a JSON array of its elements; nil is null. The loop is in array, not
// here: each element type gets its own copy of a generic body, so it is kept to one call.
func appendSlice[T any, P interface {
	*T
	jsonAppender
}](w *jsonWriter, s []T) {
	w.array(len(s), s == nil, func(i int) { P(&s[i]).appendJSON(w) })
}

// array writes n elements with elem; isNil writes null instead.
func (w *jsonWriter) array(n int, isNil bool, elem func(i int)) {
	if isNil {
		w.null()
		return
	}
	w.beginArray()
	for i := range n {
		w.elem()
		elem(i)
	}
	w.endArray()
}

// strField writes a string member, skipped when empty if omitEmpty.
//
//go:noinline
func (w *jsonWriter) strField(name, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	w.field(name)
	w.str(v)
}

// boolField writes a bool member, skipped when false if omitEmpty.
//
//go:noinline
func (w *jsonWriter) boolField(name string, v, omitEmpty bool) {
	if omitEmpty && !v {
		return
	}
	w.field(name)
	w.bool(v)
}

// uintField writes an unsigned member, skipped when 0 if omitEmpty.
//
//go:noinline
func (w *jsonWriter) uintField(name string, v uint32, omitEmpty bool) {
	if omitEmpty && v == 0 {
		return
	}
	w.field(name)
	w.uint(uint64(v))
}

// emptyObjectField writes a *struct{} member (an empty proto message): {} when set, null when
// nil unless omitEmpty.
//
//go:noinline
func (w *jsonWriter) emptyObjectField(name string, v *struct{}, omitEmpty bool) {
	if omitEmpty && v == nil {
		return
	}
	w.field(name)
	if v == nil {
		w.null()
		return
	}
	w.beginObject()
	w.endObject()
}

// floats writes a []float64 as encoding/json does; nil is null.
func (w *jsonWriter) floats(v []float64) {
	w.array(len(v), v == nil, func(i int) { w.float(v[i], 64) })
}
