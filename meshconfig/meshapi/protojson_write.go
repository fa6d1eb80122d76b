package meshapi

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/wingman-mesh/wingman/internal/jsonstr"
)

// The helpers of the generated appendProtoJSON methods (protojson.gen.go). Each writes one value
// as protojson.Marshal writes it with default options; the rules were read from
// google.golang.org/protobuf's encoding/protojson and internal/encoding/json, and the tests
// compare the output with protojson's own (protojson_test.go, FuzzProtoJSON).

// AppendProtoJSON appends x in the protobuf JSON mapping to b: the bytes protojson.Marshal writes
// for x's message with default options, compacted (no whitespace). A nil x writes {}. The error
// (and then b unchanged) is protojson's: a string holding invalid UTF-8, a Duration out of range.
func AppendProtoJSON(b []byte, x Message) ([]byte, error) {
	w := &jsonOut{b: b}
	x.appendProtoJSON(w)
	if w.err != nil {
		return b, fmt.Errorf("meshapi: %s as JSON: %w", x.protoName(), w.err)
	}
	return w.b, nil
}

// jsonMessage is a generated message type, which writes itself (a nil one as {}).
type jsonMessage interface{ appendProtoJSON(w *jsonOut) }

// jsonOut is what the generated writers write to: the bytes so far and the first value refused.
// The writers are small and called once per field, so the generated code stays a list of calls.
// Keys are given quoted with their colon (`"name":`), as the generated code holds them.
type jsonOut struct {
	b   []byte
	err *jsonFieldError
}

// jsonFieldError is a value protojson refuses to write, with the JSON path of its field.
type jsonFieldError struct {
	path string // JSON names, outermost first, dot-separated
	msg  string
}

func (e *jsonFieldError) Error() string { return "field " + e.path + ": " + e.msg }

// keyName is the JSON name in a key `"name":`.
func keyName(key string) string { return key[1 : len(key)-2] }

// fail records the first value refused, in the field of key.
func (w *jsonOut) fail(key string, err error) {
	if w.err == nil {
		w.err = &jsonFieldError{path: keyName(key), msg: err.Error()}
	}
}

func (w *jsonOut) open(c byte)  { w.b = append(w.b, c) }
func (w *jsonOut) close(c byte) { w.b = append(w.b, c) }

// sep appends the comma before an object member or array element unless it is the first: every
// value ends in a byte other than '{' and '[', so the container is empty exactly when the bytes
// end in open, its opening bracket.
func (w *jsonOut) sep(open byte) {
	if w.b[len(w.b)-1] != open {
		w.b = append(w.b, ',')
	}
}

// field starts an object member.
//
//go:noinline
func (w *jsonOut) field(key string) {
	w.sep('{')
	w.b = append(w.b, key...)
}

// The value writers: one value, whatever it holds (list elements, map values, oneof members,
// wrapper values).

func (w *jsonOut) boolV(v bool)                       { w.b = strconv.AppendBool(w.b, v) }
func (w *jsonOut) intV(v int64)                       { w.b = strconv.AppendInt(w.b, v, 10) }
func (w *jsonOut) uintV(v uint64)                     { w.b = strconv.AppendUint(w.b, v, 10) }
func (w *jsonOut) int64V(v int64)                     { w.b = appendJSONInt64(w.b, v) }
func (w *jsonOut) uint64V(v uint64)                   { w.b = appendJSONUint64(w.b, v) }
func (w *jsonOut) floatV(v float64, bits int)         { w.b = appendJSONFloat(w.b, v, bits) }
func (w *jsonOut) bytesV(v []byte)                    { w.b = appendJSONBytes(w.b, v) }
func (w *jsonOut) enumV(v int32, name string)         { w.b = appendJSONEnum(w.b, v, name) }
func (w *jsonOut) messageV(key string, m jsonMessage) { w.nested(key, m) }

//go:noinline
func (w *jsonOut) stringV(key, v string) {
	var err error
	if w.b, err = appendJSONString(w.b, v); err != nil {
		w.fail(key, err)
	}
}

//go:noinline
func (w *jsonOut) durationV(key string, d *durationpb.Duration) {
	var err error
	if w.b, err = appendJSONDuration(w.b, d); err != nil {
		w.fail(key, err)
	}
}

// nested writes the message m, putting a value it refuses under key's field.
//
//go:noinline
func (w *jsonOut) nested(key string, m jsonMessage) {
	clean := w.err == nil
	m.appendProtoJSON(w)
	if clean && w.err != nil {
		w.err.path = keyName(key) + "." + w.err.path
	}
}

// The field writers of proto3 fields without presence: nothing for the zero value.

//go:noinline
func (w *jsonOut) boolField(key string, v bool) {
	if v {
		w.field(key)
		w.boolV(v)
	}
}

//go:noinline
func (w *jsonOut) intField(key string, v int64) {
	if v != 0 {
		w.field(key)
		w.intV(v)
	}
}

//go:noinline
func (w *jsonOut) uintField(key string, v uint64) {
	if v != 0 {
		w.field(key)
		w.uintV(v)
	}
}

//go:noinline
func (w *jsonOut) int64Field(key string, v int64) {
	if v != 0 {
		w.field(key)
		w.int64V(v)
	}
}

//go:noinline
func (w *jsonOut) uint64Field(key string, v uint64) {
	if v != 0 {
		w.field(key)
		w.uint64V(v)
	}
}

//go:noinline
func (w *jsonOut) floatField(key string, v float64, bits int) {
	if jsonFloatSet(v) {
		w.field(key)
		w.floatV(v, bits)
	}
}

//go:noinline
func (w *jsonOut) bytesField(key string, v []byte) {
	if len(v) > 0 {
		w.field(key)
		w.bytesV(v)
	}
}

//go:noinline
func (w *jsonOut) stringField(key, v string) {
	if v != "" {
		w.field(key)
		w.stringV(key, v)
	}
}

//go:noinline
func (w *jsonOut) enumField(key string, v int32, name string) {
	if v != 0 {
		w.field(key)
		w.enumV(v, name)
	}
}

// durationField writes a Duration field unless it is nil (unset).
//
//go:noinline
func (w *jsonOut) durationField(key string, d *durationpb.Duration) {
	if d != nil {
		w.field(key)
		w.durationV(key, d)
	}
}

// messageField writes a message field, which the caller has found set (not nil).
//
//go:noinline
func (w *jsonOut) messageField(key string, m jsonMessage) {
	w.field(key)
	w.nested(key, m)
}

// Map keys, written as JSON strings.

//go:noinline
func (w *jsonOut) stringKey(key, k string) {
	w.sep('{')
	w.stringV(key, k)
	w.b = append(w.b, ':')
}

func (w *jsonOut) intKey(k int64) {
	w.sep('{')
	w.b = append(appendJSONInt64(w.b, k), ':')
}

func (w *jsonOut) uintKey(k uint64) {
	w.sep('{')
	w.b = append(appendJSONUint64(w.b, k), ':')
}

func (w *jsonOut) boolKey(k bool) {
	w.sep('{')
	w.b = append(strconv.AppendBool(append(w.b, '"'), k), '"', ':')
}

// appendJSONEnum writes an enum as protojson does: its name quoted, or its number when it has
// none (name empty).
func appendJSONEnum(b []byte, v int32, name string) []byte {
	if name == "" {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return append(append(append(b, '"'), name...), '"')
}

// sortedKeys returns m's keys in protojson's order (order.GenericKeyOrder: numbers ascending,
// strings by their bytes).
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var (
	errInvalidUTF8   = errors.New("string holds invalid UTF-8")
	errDurationSigns = errors.New("google.protobuf.Duration: signs of seconds and nanos do not match")
)

// appendJSONString appends s quoted as protojson quotes it: '"' and '\' escaped with a backslash,
// control characters as \b \f \n \r \t or \u00xx (lower-case hex), everything else as is; invalid
// UTF-8 is an error, as protojson makes it.
func appendJSONString(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return b, errInvalidUTF8
			}
			i += n
			continue
		}
		if c >= ' ' && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		b = jsonstr.AppendEscapedASCII(b, c)
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), nil
}

// appendJSONInt64 writes a 64-bit integer as protojson does: a quoted decimal string.
func appendJSONInt64(b []byte, v int64) []byte {
	return append(strconv.AppendInt(append(b, '"'), v, 10), '"')
}

// appendJSONUint64 is appendJSONInt64 for the unsigned kinds.
func appendJSONUint64(b []byte, v uint64) []byte {
	return append(strconv.AppendUint(append(b, '"'), v, 10), '"')
}

// jsonFloatSet says whether a proto3 float or double field holding f is populated: any bits set
// (so -0 and NaN are, as protobuf-go's presence rule has it).
func jsonFloatSet(f float64) bool { return math.Float64bits(f) != 0 }

// appendJSONFloat writes a float (bits 32) or double (bits 64) as protojson does: NaN and the
// infinities as the strings "NaN", "Infinity", "-Infinity"; otherwise the shortest decimal that
// reads back to the same value at that size, in exponent form below 1e-6 or from 1e21 on (as
// encoding/json), with the exponent's leading zero dropped (1e-07 becomes 1e-7).
func appendJSONFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	form := byte('f')
	if a := math.Abs(f); a != 0 {
		small, large := a < 1e-6, a >= 1e21
		if bits == 32 {
			small, large = float32(a) < 1e-6, float32(a) >= 1e21
		}
		if small || large {
			form = 'e'
		}
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, form, -1, bits)
	if form == 'e' {
		// "e-07" -> "e-7"; AppendFloat writes at least two exponent digits.
		n := len(b)
		if n-start >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONBytes writes bytes as protojson does: standard base64 with padding, quoted.
func appendJSONBytes(b []byte, v []byte) []byte {
	return append(base64.StdEncoding.AppendEncode(append(b, '"'), v), '"')
}

// maxDurationSeconds is the range protojson accepts for a Duration's seconds: ±10000 years
// (google/protobuf/duration.proto).
const maxDurationSeconds = 315576000000

// appendJSONDuration writes a google.protobuf.Duration as protojson does: the seconds, then a
// fraction of 3, 6 or 9 digits if the nanos are not zero (the fewest of those that hold them),
// then "s", with one leading '-' if either part is negative ("-0.500s"). protojson refuses
// seconds beyond ±315576000000, nanos beyond ±999999999, and parts of opposite signs. A nil
// Duration is the zero one, "0s".
func appendJSONDuration(b []byte, d *durationpb.Duration) ([]byte, error) {
	secs, nanos := d.GetSeconds(), d.GetNanos()
	switch {
	case secs < -maxDurationSeconds || secs > maxDurationSeconds:
		return b, fmt.Errorf("google.protobuf.Duration: seconds out of range %d", secs)
	case nanos <= -1e9 || nanos >= 1e9:
		return b, fmt.Errorf("google.protobuf.Duration: nanos out of range %d", nanos)
	case (secs > 0 && nanos < 0) || (secs < 0 && nanos > 0):
		return b, errDurationSigns
	}
	b = append(b, '"')
	if secs < 0 || nanos < 0 {
		b = append(b, '-')
		secs, nanos = -secs, -nanos
	}
	b = strconv.AppendUint(b, uint64(secs), 10)
	if nanos != 0 {
		digits := 9
		for digits > 3 && nanos%1000 == 0 {
			nanos /= 1000
			digits -= 3
		}
		b = append(b, '.')
		for p := digits - 1; p >= 0; p-- { // zero-padded to digits
			b = append(b, byte('0'+nanos/pow10[p]%10))
		}
	}
	return append(b, 's', '"'), nil
}

var pow10 = [9]int32{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8}
