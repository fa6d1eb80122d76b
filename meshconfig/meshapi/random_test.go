package meshapi

import (
	"math"
	"math/rand/v2"
	"reflect"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The random filler of the generated message structs, for the differential tests of the JSON
// writer. It uses nothing but reflection and the well-known types, so that meshgen's test of
// every field kind runs it over the structs it generates for its own test message.

var randomStrings = []string{
	"", "a", "istiod.istio-system.svc:15012", "quote\"back\\slash", "ctl\x00\x01\x1f\x7f\b\f\n\r\t",
	"<html>&amp;", "ünïcödé ☃ 𝄞", "\u2028\u2029", "\ufffd", "bad\xffutf8", "trunc\xe2\x82", "\xc0\xaf",
}

var randomFloats = []float64{
	0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.5e300, 5e-324,
	math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1), 123456789.125,
}

var randomDurations = [][2]int64{
	{0, 0}, {1, 0}, {1, 500000000}, {1, 500000}, {1, 500}, {0, -500000000}, {-3, -1},
	{315576000000, 999999999}, {-315576000000, -999999999}, {315576000001, 0}, {-315576000001, 0},
	{0, 1000000000}, {0, -1000000000}, {1, -1}, {-1, 1}, {0, 1}, {86400, 10000000},
}

// randomFill sets some of the fields of the struct v (one of the generated message structs)
// to random values.
func randomFill(r *rand.Rand, v reflect.Value, depth int) {
	var wrappers []any
	if h, ok := v.Addr().Interface().(oneofHolder); ok {
		wrappers = h.oneofWrappers()
	}
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || r.IntN(3) == 0 {
			continue
		}
		if f.Kind() == reflect.Interface { // a oneof
			var ws []reflect.Type
			for _, w := range wrappers {
				if wt := reflect.TypeOf(w); wt.Implements(f.Type()) {
					ws = append(ws, wt)
				}
			}
			wt := ws[r.IntN(len(ws))]
			if r.IntN(8) == 0 {
				f.Set(reflect.Zero(wt)) // a typed nil wrapper: unset
				continue
			}
			w := reflect.New(wt.Elem())
			randomValue(r, w.Elem().Field(0), depth)
			f.Set(w)
			continue
		}
		randomValue(r, f, depth)
	}
}

// randomValue sets the settable f (a field, element or map value) to a random value.
func randomValue(r *rand.Rand, f reflect.Value, depth int) {
	switch f.Kind() {
	case reflect.Bool:
		f.SetBool(r.IntN(2) == 0)
	case reflect.Int32, reflect.Int64:
		if f.Type().Name() != "int32" && f.Type().Name() != "int64" { // an enum: named, unnamed, negative
			f.SetInt(int64(r.IntN(8)) - 1)
			return
		}
		vals := []int64{0, 1, -1, math.MaxInt32, math.MinInt32, r.Int64()}
		v := vals[r.IntN(len(vals))]
		if f.Kind() == reflect.Int32 {
			v = int64(int32(v))
		}
		f.SetInt(v)
	case reflect.Uint32, reflect.Uint64:
		vals := []uint64{0, 1, math.MaxUint32, r.Uint64()}
		v := vals[r.IntN(len(vals))]
		if f.Kind() == reflect.Uint32 {
			v = uint64(uint32(v))
		}
		f.SetUint(v)
	case reflect.Float32, reflect.Float64:
		v := randomFloats[r.IntN(len(randomFloats))]
		if r.IntN(3) == 0 {
			v = math.Float64frombits(r.Uint64())
		}
		f.SetFloat(v)
	case reflect.String:
		s := randomStrings[r.IntN(len(randomStrings))]
		if !utf8.ValidString(s) && r.IntN(8) != 0 {
			s = "ok" // keep most configs writable
		}
		f.SetString(s)
	case reflect.Slice:
		if f.Type().Elem().Kind() == reflect.Uint8 { // bytes
			b := make([]byte, r.IntN(5))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			f.SetBytes(b)
			return
		}
		n := r.IntN(4)
		s := reflect.MakeSlice(f.Type(), n, n)
		for i := range n {
			randomValue(r, s.Index(i), depth)
		}
		f.Set(s)
	case reflect.Map:
		n := r.IntN(4)
		m := reflect.MakeMapWithSize(f.Type(), n)
		for range n {
			k := reflect.New(f.Type().Key()).Elem()
			randomValue(r, k, depth)
			val := reflect.New(f.Type().Elem()).Elem()
			randomValue(r, val, depth)
			m.SetMapIndex(k, val)
		}
		f.Set(m)
	case reflect.Pointer:
		if depth == 0 || r.IntN(6) == 0 {
			f.SetZero() // nil: absent as a field, the empty message as an element or map value
			return
		}
		np := reflect.New(f.Type().Elem())
		switch p := np.Interface().(type) {
		case *durationpb.Duration:
			d := randomDurations[r.IntN(len(randomDurations))]
			p.Seconds, p.Nanos = d[0], int32(d[1])
		case *wrapperspb.BoolValue:
			p.Value = r.IntN(2) == 0
		case *wrapperspb.Int32Value:
			p.Value = []int32{0, 7, -7, math.MaxInt32}[r.IntN(4)]
		case *wrapperspb.Int64Value:
			p.Value = []int64{0, 7, -7, math.MaxInt64, math.MinInt64}[r.IntN(5)]
		case *wrapperspb.UInt32Value:
			p.Value = r.Uint32()
		case *wrapperspb.UInt64Value:
			p.Value = r.Uint64()
		case *wrapperspb.DoubleValue:
			p.Value = randomFloats[r.IntN(len(randomFloats))]
		case *wrapperspb.FloatValue:
			p.Value = float32(randomFloats[r.IntN(len(randomFloats))])
		case *wrapperspb.StringValue:
			p.Value = randomStrings[r.IntN(len(randomStrings))]
		case proto.Message:
			panic("randomValue: no rule for " + f.Type().String())
		default:
			randomFill(r, np.Elem(), depth-1)
		}
		f.Set(np)
	default:
		panic("randomValue: no rule for " + f.Type().String())
	}
}
