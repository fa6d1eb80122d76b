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
)

// The helpers of the generated appendProtoJSON methods (protojson.gen.go). Each writes one value
// as protojson.Marshal writes it with default options; the rules were read from
// google.golang.org/protobuf's encoding/protojson and internal/encoding/json, and the tests
// compare the output with protojson's own (protojson_test.go, FuzzProtoJSON).

// AppendProtoJSON appends x in the protobuf JSON mapping to b: the bytes protojson.Marshal writes
// for x's message with default options, compacted (no whitespace). A nil x writes {}. The error
// (and then no bytes) is protojson's: a string holding invalid UTF-8, a Duration out of range.
func AppendProtoJSON(b []byte, x Message) ([]byte, error) {
	out, err := x.appendProtoJSON(b)
	if err != nil {
		return b, fmt.Errorf("meshapi: %s as JSON: %w", x.protoName(), err)
	}
	return out, nil
}

// jsonFieldError is a value protojson refuses to write, with the JSON path of its field.
type jsonFieldError struct {
	path string // JSON names, outermost first, dot-separated
	msg  string
}

func (e *jsonFieldError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return "field " + e.path + ": " + e.msg
}

// inJSONField puts err, returned by the writer of field name's value, under that field.
func inJSONField(err error, name string) error {
	var fe *jsonFieldError
	if !errors.As(err, &fe) {
		return &jsonFieldError{path: name, msg: err.Error()}
	}
	if fe.path == "" {
		fe.path = name
	} else {
		fe.path = name + "." + fe.path
	}
	return fe
}

// appendJSONField starts an object member: a comma unless it is the object's first, then the
// quoted name and colon given in name. Every value ends in a byte other than '{', so the object
// has no member yet exactly when b ends in its '{'.
func appendJSONField(b []byte, name string) []byte {
	return append(appendJSONSep(b, '{'), name...)
}

// appendJSONSep appends the comma before an object member or array element unless b ends in
// open, the container's opening bracket.
func appendJSONSep(b []byte, open byte) []byte {
	if b[len(b)-1] != open {
		b = append(b, ',')
	}
	return b
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

const lowerHex = "0123456789abcdef"

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
				return b, &jsonFieldError{msg: "string holds invalid UTF-8"}
			}
			i += n
			continue
		}
		if c >= ' ' && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xf])
		}
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
		return b, &jsonFieldError{msg: "google.protobuf.Duration: seconds out of range " + strconv.FormatInt(secs, 10)}
	case nanos <= -1e9 || nanos >= 1e9:
		return b, &jsonFieldError{msg: "google.protobuf.Duration: nanos out of range " + strconv.FormatInt(int64(nanos), 10)}
	case (secs > 0 && nanos < 0) || (secs < 0 && nanos > 0):
		return b, &jsonFieldError{msg: "google.protobuf.Duration: signs of seconds and nanos do not match"}
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
