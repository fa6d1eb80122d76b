package bootstrap

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"

	"github.com/wingman-mesh/wingman/bootstrap/proxyconfig"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// Random values for the writer's differential tests. Reflection is fine here: it only builds
// inputs; encoding/json is the reference the writer is compared with.

func writeTestFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// stringPieces are fragments random strings are made of: plain text and everything
// encoding/json's string encoder treats specially.
var stringPieces = []string{
	"a", "envoy", "Z9", " ", "/", "@type", "%Y", ".", ":", "\"", "\\", "\b", "\f", "\n", "\r", "\t",
	"\x00", "\x01", "\x1f", "\x7f", "<", ">", "&", "\u2028", "\u2029", "é", "日本", "😀",
	"\xff", "\xe2\x80", "\xed\xa0\x80", "\u00ad", "\ufeff",
}

func randomString(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return ""
	}
	var b strings.Builder
	for range 1 + r.IntN(6) {
		b.WriteString(stringPieces[r.IntN(len(stringPieces))])
	}
	return b.String()
}

// randomFloat covers both sides of encoding/json's switch to exponent form (1e-6, 1e21),
// integers, negative zero and values needing all 17 digits.
func randomFloat(r *rand.Rand) float64 {
	switch r.IntN(8) {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return float64(r.IntN(2000) - 1000)
	case 3:
		return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(60)-30))
	case 4:
		return []float64{1e-6, 9.999999e-7, 1e21, 9.99999999999999e20, 1e-7, 123456789e-15, math.MaxFloat64, math.SmallestNonzeroFloat64}[r.IntN(8)]
	case 5:
		return math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(r.IntN(0x7fe))<<52) // finite
	default:
		return r.NormFloat64() * 100
	}
}

// randomAny is a dynamic value of the shapes the render puts in `any` fields, and a few it
// does not (small ints, float32), nested.
func randomAny(r *rand.Rand, depth int) any {
	n := 14
	if depth > 3 {
		n = 7 // scalars only
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return randomString(r)
	case 2:
		return r.IntN(2) == 0
	case 3:
		return randomFloat(r)
	case 4:
		return r.IntN(1<<20) - 1<<19
	case 5:
		if f := float32(randomFloat(r)); !math.IsInf(float64(f), 0) {
			return f
		}
		return float32(1e-7)
	case 6:
		return r.Uint32()
	case 7:
		if r.IntN(5) == 0 {
			return map[string]any(nil)
		}
		m := map[string]any{}
		for range r.IntN(4) {
			m[randomString(r)] = randomAny(r, depth+1)
		}
		return m
	case 8:
		if r.IntN(5) == 0 {
			return []any(nil)
		}
		s := []any{}
		for range r.IntN(4) {
			s = append(s, randomAny(r, depth+1))
		}
		return s
	case 9:
		m := map[string]string{}
		for range r.IntN(4) {
			m[randomString(r)] = randomString(r)
		}
		return m
	case 10:
		return []string{randomString(r), randomString(r)}
	case 11:
		return json.RawMessage(randomRawJSON(r, depth))
	case 12:
		var v HTTPConnectionManager
		fillRandom(r, reflect.ValueOf(&v).Elem(), depth+1)
		return v
	default:
		if r.IntN(4) == 0 {
			return (*SocketAddress)(nil)
		}
		v := &SocketAddress{}
		fillRandom(r, reflect.ValueOf(v).Elem(), depth+1)
		return v
	}
}

// randomRawJSON is valid JSON text as someone else wrote it: any whitespace between tokens,
// unescaped <, >, &, U+2028 and UTF-8 in strings, escapes, numbers in every form.
func randomRawJSON(r *rand.Rand, depth int) string {
	ws := func() string { return []string{"", "", " ", "\n  ", "\t", "\r\n"}[r.IntN(6)] }
	var b strings.Builder
	rawStr := func() {
		b.WriteByte('"')
		for range r.IntN(5) {
			b.WriteString([]string{"a", "<", ">", "&", "\u2028", "\u2029", `\"`, `\\`, `\u2028`, `\u003c`, `\n`, "é", "/", `\/`, "\x7f", "\xff"}[r.IntN(16)])
		}
		b.WriteByte('"')
	}
	var gen func(d int)
	gen = func(d int) {
		b.WriteString(ws())
		k := r.IntN(8)
		if d > 3 {
			k = r.IntN(4)
		}
		switch k {
		case 0:
			b.WriteString([]string{"null", "true", "false"}[r.IntN(3)])
		case 1:
			b.WriteString([]string{"0", "-1", "1.50", "1e400", "2E-3", "-0.0e+5", "123456789012345678901234567890"}[r.IntN(7)])
		case 2, 3:
			rawStr()
		case 4, 5:
			b.WriteByte('[')
			for i := range r.IntN(4) {
				if i > 0 {
					b.WriteString(ws() + ",")
				}
				gen(d + 1)
			}
			b.WriteString(ws() + "]")
		default:
			b.WriteByte('{')
			for i := range r.IntN(4) {
				if i > 0 {
					b.WriteString(ws() + ",")
				}
				b.WriteString(ws())
				rawStr()
				b.WriteString(ws() + ":")
				gen(d + 1)
			}
			b.WriteString(ws() + "}")
		}
		b.WriteString(ws())
	}
	gen(depth)
	s := b.String()
	if !json.Valid([]byte(s)) {
		panic("randomRawJSON made invalid JSON: " + s)
	}
	return s
}

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	proxyConfigJSONType = reflect.TypeFor[*ProxyConfigJSON]()
)

// fillRandom sets v to a random value of its type: each field at random zero or set, slices
// and maps nil, empty or short.
func fillRandom(r *rand.Rand, v reflect.Value, depth int) {
	fill(r, v, depth, false)
}

// fillAll sets every field, pointer, slice and map of v to a non-zero value.
func fillAll(r *rand.Rand, v reflect.Value, depth int) {
	fill(r, v, depth, true)
}

func fill(r *rand.Rand, v reflect.Value, depth int, all bool) {
	zero := func() bool { return !all && r.IntN(3) == 0 }
	if v.Type() == rawMessageType {
		if zero() {
			v.SetZero()
			return
		}
		v.SetBytes([]byte(randomRawJSON(r, depth)))
		return
	}
	if v.Type() == proxyConfigJSONType {
		if zero() {
			v.SetZero()
			return
		}
		pc := proxyconfig.Default()
		valid := func() string { return strings.ToValidUTF8(randomString(r), "?") } // else protojson refuses it
		pc.ClusterName = &meshapi.ProxyConfig_ServiceCluster{ServiceCluster: valid()}
		pc.ProxyMetadata = map[string]string{valid(): valid()}
		v.Set(reflect.ValueOf(&ProxyConfigJSON{pc}))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth+1, all)
			}
		}
	case reflect.Pointer:
		if zero() || depth > 20 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(r, v.Elem(), depth, all)
	case reflect.Slice:
		if zero() || depth > 20 {
			if r.IntN(2) == 0 {
				v.SetZero()
			} else {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		n := 1 + r.IntN(3)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(r, v.Index(i), depth+1, all)
		}
	case reflect.Map:
		if zero() || depth > 20 {
			if r.IntN(2) == 0 {
				v.SetZero()
			} else {
				v.Set(reflect.MakeMap(v.Type()))
			}
			return
		}
		v.Set(reflect.MakeMap(v.Type()))
		for range 1 + r.IntN(3) {
			k := reflect.New(v.Type().Key()).Elem()
			k.SetString(randomString(r))
			e := reflect.New(v.Type().Elem()).Elem()
			fill(r, e, depth+1, all)
			v.SetMapIndex(k, e)
		}
	case reflect.Interface:
		if zero() {
			v.SetZero()
			return
		}
		a := randomAny(r, 0)
		for all && a == nil {
			a = randomAny(r, 0)
		}
		if a != nil {
			v.Set(reflect.ValueOf(a))
		}
	case reflect.String:
		s := randomString(r)
		for all && s == "" {
			s = randomString(r)
		}
		if !zero() {
			v.SetString(s)
		}
	case reflect.Bool:
		v.SetBool(all || r.IntN(2) == 0)
	case reflect.Int:
		if !zero() {
			v.SetInt(int64(r.IntN(1<<17)) - 1<<10)
		}
	case reflect.Uint32:
		if !zero() {
			v.SetUint(uint64(1 + r.Uint32N(math.MaxUint32)))
		}
	case reflect.Float64:
		if !zero() {
			v.SetFloat(randomFloat(r))
		}
	default:
		panic("fill: no rule for " + v.Type().String())
	}
}
