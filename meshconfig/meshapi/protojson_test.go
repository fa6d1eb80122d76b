package meshapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// The expected bytes in these tests are protojson's own: protojson.Marshal of the same config
// converted to a dynamic message of the embedded descriptors (the path MarshalProtoJSON took
// before the generated writer), compacted with json.Compact (protojson inserts random spaces).
// Comparing compacted bytes checks the key order as well as the values.

// protojsonOf is the reference: protojson's bytes for x, compacted, or its error.
func protojsonOf(t testing.TB, x Message) ([]byte, error) {
	t.Helper()
	m, err := ToDynamic(x)
	if err != nil {
		t.Fatalf("ToDynamic: %v", err)
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("protojson wrote invalid JSON: %v\n%s", err, b)
	}
	return out.Bytes(), nil
}

// checkSameJSON fails unless the generated writer gives protojson's bytes for pc, or an error
// where protojson gives one. It reports whether protojson wrote the config.
func checkSameJSON(t testing.TB, pc *ProxyConfig) bool {
	t.Helper()
	want, wantErr := protojsonOf(t, pc)
	got, err := MarshalProtoJSON(pc)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error: got %v, protojson %v\nconfig: %v", err, wantErr, pc)
	}
	if err != nil {
		return false
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("bytes differ\n got: %s\nwant: %s", got, want)
	}
	// Appending keeps what b held.
	got2, err := AppendProtoJSON([]byte("x:"), pc)
	if err != nil || string(got2) != "x:"+string(want) {
		t.Fatalf("AppendProtoJSON with a prefix: %s, %v", got2, err)
	}
	return true
}

// TestProtoJSONEveryField: configs with every field set (istio.io/api's types filled through
// reflection, one per member of the oneofs) and the empty one.
func TestProtoJSONEveryField(t *testing.T) {
	configs := []*ProxyConfig{nil, {}}
	for _, theirs := range richConfigs() {
		ours := &ProxyConfig{}
		if err := FromDynamic(theirs.ProtoReflect(), ours); err != nil {
			t.Fatal(err)
		}
		configs = append(configs, ours)
	}
	for _, pc := range configs {
		if !checkSameJSON(t, pc) {
			t.Fatalf("protojson refused %v", pc)
		}
	}
}

// TestProtoJSONNegativeZero: a proto3 double holding -0 is populated for istio.io/api's type
// (protoc-gen-go's presence rule compares bits), so protojson writes it; so must we, and the
// conversion to dynamic messages must keep it.
func TestProtoJSONNegativeZero(t *testing.T) {
	theirs := &meshv1alpha1.ProxyConfig{Tracing: &meshv1alpha1.Tracing{Sampling: math.Copysign(0, -1)}}
	want, err := protojson.Marshal(theirs)
	if err != nil {
		t.Fatal(err)
	}
	ours := &ProxyConfig{}
	if err := FromDynamic(theirs.ProtoReflect(), ours); err != nil {
		t.Fatal(err)
	}
	got, err := MarshalProtoJSON(ours)
	if err != nil || string(got) != compact(t, want) || !strings.Contains(string(got), `"sampling":-0`) {
		t.Fatalf("got %s (%v), Istio's type %s", got, err, want)
	}
	checkSameJSON(t, ours)
}

// TestProtoJSONGoldenConfigs: the PROXY_CONFIG of every bootstrap golden (the configs the
// bootstrap tests render).
func TestProtoJSONGoldenConfigs(t *testing.T) {
	files, err := filepath.Glob("../../bootstrap/testdata/*.golden.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bootstrap goldens: %v", err)
	}
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Node struct {
				Metadata struct {
					ProxyConfig json.RawMessage `json:"PROXY_CONFIG"`
				} `json:"metadata"`
			} `json:"node"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil || doc.Node.Metadata.ProxyConfig == nil {
			continue
		}
		pc := &ProxyConfig{}
		if err := UnmarshalProtoJSON(doc.Node.Metadata.ProxyConfig, pc, protojson.UnmarshalOptions{}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		checkSameJSON(t, pc)
		n++
	}
	if n < 5 {
		t.Fatalf("only %d goldens hold a PROXY_CONFIG", n)
	}
}

// TestProtoJSONRandom: random fillings of the Go structs, reaching what a parse cannot: nil list
// elements, map values and oneof messages, typed-nil oneof wrappers, unnamed enum numbers,
// negative zero, NaN and infinities, invalid UTF-8, out-of-range durations.
func TestProtoJSONRandom(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	refused := 0
	for seed := range uint64(n) {
		r := rand.New(rand.NewPCG(seed, 16))
		pc := &ProxyConfig{}
		randomFill(r, reflect.ValueOf(pc).Elem(), 4)
		if !checkSameJSON(t, pc) {
			refused++
		}
	}
	// Both kinds of outcome must be exercised.
	if refused == 0 || refused == n {
		t.Fatalf("%d of %d configs refused by protojson", refused, n)
	}
}

// TestProtoJSONScalars checks the helpers for the kinds ProxyConfig's closure does not hold
// (float, int64/uint64 values, bytes, strings of every byte) against protojson through the
// wrapper types, whose JSON is the bare value.
func TestProtoJSONScalars(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	compacted := func(m proto.Message) string {
		b, err := protojson.Marshal(m)
		if err != nil {
			return "error"
		}
		var out bytes.Buffer
		if err := json.Compact(&out, b); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	for i := range 20000 {
		f64 := math.Float64frombits(r.Uint64())
		if i < len(randomFloats) {
			f64 = randomFloats[i]
		} else if i%3 == 0 {
			f64 = r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
		}
		f32 := float32(f64)
		if i%5 == 0 {
			f32 = math.Float32frombits(r.Uint32())
		}
		if got, want := string(appendJSONFloat(nil, f64, 64)), compacted(wrapperspb.Double(f64)); got != want {
			t.Fatalf("double %v: got %s, want %s", f64, got, want)
		}
		if got, want := string(appendJSONFloat(nil, float64(f32), 32)), compacted(wrapperspb.Float(f32)); got != want {
			t.Fatalf("float %v: got %s, want %s", f32, got, want)
		}
		i64 := r.Int64() >> r.IntN(64)
		if got, want := string(appendJSONInt64(nil, i64)), compacted(wrapperspb.Int64(i64)); got != want {
			t.Fatalf("int64 %v: got %s, want %s", i64, got, want)
		}
		u64 := r.Uint64() >> r.IntN(64)
		if got, want := string(appendJSONUint64(nil, u64)), compacted(wrapperspb.UInt64(u64)); got != want {
			t.Fatalf("uint64 %v: got %s, want %s", u64, got, want)
		}
		raw := make([]byte, r.IntN(12))
		for j := range raw {
			raw[j] = byte(r.Uint32())
			if r.IntN(3) == 0 {
				raw[j] &= 0x7f
			}
		}
		if got, want := string(appendJSONBytes(nil, raw)), compacted(wrapperspb.Bytes(raw)); got != want {
			t.Fatalf("bytes %x: got %s, want %s", raw, got, want)
		}
		got := "error"
		if b, err := appendJSONString(nil, string(raw)); err == nil {
			got = string(b)
		}
		if want := compacted(wrapperspb.String(string(raw))); got != want {
			t.Fatalf("string %q: got %s, want %s", raw, got, want)
		}
		d := &durationpb.Duration{Seconds: r.Int64N(2*maxDurationSeconds+3) - maxDurationSeconds - 1, Nanos: int32(r.Int64N(2e9+1) - 1e9)}
		switch i % 4 {
		case 0:
			d.Seconds %= 1000
		case 1:
			d.Nanos = d.Nanos / 1000 * 1000
		case 2:
			d.Nanos = d.Nanos / 1000000 * 1000000
		}
		if i%7 == 0 {
			d.Seconds = 0
		}
		got = "error"
		if b, err := appendJSONDuration(nil, d); err == nil {
			got = string(b)
		}
		if want := compacted(d); got != want {
			t.Fatalf("duration %v: got %s, want %s", d, got, want)
		}
	}
}

// TestProtoJSONErrorNamesField: a refused value is reported with the path of its field.
func TestProtoJSONErrorNamesField(t *testing.T) {
	pc := &ProxyConfig{Tracing: &Tracing{Tracer: &Tracing_Zipkin_{Zipkin: &Tracing_Zipkin{Address: "bad\xff"}}}}
	_, err := MarshalProtoJSON(pc)
	if err == nil || !strings.Contains(err.Error(), "tracing.zipkin.address") || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("err = %v, want one naming tracing.zipkin.address and UTF-8", err)
	}
	pc = &ProxyConfig{DrainDuration: &durationpb.Duration{Seconds: 1, Nanos: -1}}
	_, err = MarshalProtoJSON(pc)
	if err == nil || !strings.Contains(err.Error(), "drainDuration") || !strings.Contains(err.Error(), "signs") {
		t.Fatalf("err = %v, want one naming drainDuration and the signs", err)
	}
}

// FuzzProtoJSON parses the fuzz bytes as a ProxyConfig document (the path configs take in) and
// compares the generated writer with protojson.
func FuzzProtoJSON(f *testing.F) {
	for _, theirs := range richConfigs() {
		b, err := protojson.Marshal(theirs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"drainDuration":"-0.000000001s","tracing":{"sampling":-0,"zipkin":{}},"concurrency":0}`))
	f.Add([]byte(`{"proxyMetadata":{"\u0000":"\u001f\"\\<"},"statusPort":15020,"tracing":{"sampling":"NaN"}}`))
	f.Add([]byte(`{"controlPlaneAuthPolicy":7,"interceptionMode":"TPROXY","terminationDrainDuration":"315576000000.999999999s"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		pc := &ProxyConfig{}
		if UnmarshalProtoJSON(doc, pc, protojson.UnmarshalOptions{DiscardUnknown: true}) != nil {
			return
		}
		checkSameJSON(t, pc)
	})
}

// benchConfigs are a typical ProxyConfig (the defaults golden's) and one with every field set.
func benchConfigs(b testing.TB) map[string]*ProxyConfig {
	raw, err := os.ReadFile("../../bootstrap/testdata/defaults.golden.json")
	if err != nil {
		b.Fatal(err)
	}
	var doc struct {
		Node struct {
			Metadata struct {
				ProxyConfig json.RawMessage `json:"PROXY_CONFIG"`
			} `json:"metadata"`
		} `json:"node"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		b.Fatal(err)
	}
	typical := &ProxyConfig{}
	if err := UnmarshalProtoJSON(doc.Node.Metadata.ProxyConfig, typical, protojson.UnmarshalOptions{}); err != nil {
		b.Fatal(err)
	}
	rich := &ProxyConfig{}
	if err := FromDynamic(richConfigs()[0].ProtoReflect(), rich); err != nil {
		b.Fatal(err)
	}
	return map[string]*ProxyConfig{"typical": typical, "rich": rich}
}

// BenchmarkProxyConfigJSON compares, in the same run, the PROXY_CONFIG encoding before (convert to
// a dynamic message, protojson, compact) and now (the generated writer).
func BenchmarkProxyConfigJSON(b *testing.B) {
	for _, name := range []string{"typical", "rich"} {
		pc := benchConfigs(b)[name]
		b.Run(name+"/protojson", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := protojsonOf(b, pc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/generated", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MarshalProtoJSON(pc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestProtoJSONAllocs gates the writer's allocations: the output buffer and the writer for a typical
// config, and a few more (buffer growth, one key slice per map) for one with every field set;
// the protojson path took 55 and ~1170.
func TestProtoJSONAllocs(t *testing.T) {
	configs := benchConfigs(t)
	for name, limit := range map[string]float64{"typical": 2, "rich": 16} {
		pc := configs[name]
		n := testing.AllocsPerRun(50, func() {
			if _, err := MarshalProtoJSON(pc); err != nil {
				t.Fatal(err)
			}
		})
		if n > limit {
			t.Errorf("%s: %v allocations, want at most %v", name, n, limit)
		}
	}
}
