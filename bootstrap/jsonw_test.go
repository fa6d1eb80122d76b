package bootstrap

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wingman-mesh/wingman/bootstrap/proxyconfig"
)

// The reference for every test here is encoding/json itself: json.MarshalIndent(v, "", "  ")
// (what Render and WriteGRPCBootstrap wrote before jsonw.go) and json.Marshal. The writer must
// produce the same bytes for every input, and send nothing through reflection.

// writeBoth returns v written by the jsonWriter and by json.MarshalIndent, each plus a newline.
func writeBoth(t testing.TB, v jsonAppender) (got, want []byte) {
	t.Helper()
	w := jsonWriter{indent: true}
	v.appendJSON(&w)
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	if w.reflected != 0 {
		t.Errorf("%d values went through encoding/json", w.reflected)
	}
	want, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("MarshalIndent: %v", err)
	}
	return append(w.buf, '\n'), append(want, '\n')
}

func requireSame(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-200)
	t.Fatalf("%s: writer and encoding/json differ at byte %d\n writer: %q\n   json: %q", what, i,
		got[lo:min(len(got), i+80)], want[lo:min(len(want), i+80)])
}

// TestRenderMatchesMarshalIndent: every golden and parity input, rendered with the writer, is
// byte for byte what json.MarshalIndent makes of the same typed bootstrap; so is the gRPC
// bootstrap, with and without certificate providers.
func TestRenderMatchesMarshalIndent(t *testing.T) {
	for name, cfg := range parityCases(t) {
		t.Run(name, func(t *testing.T) {
			b, err := Build(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, want := writeBoth(t, b)
			requireSame(t, "bootstrap", got, want)
			out, err := Render(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			requireSame(t, "Render", out, want)

			for _, certs := range []string{"", "/var/run/certs"} {
				g, err := BuildGRPCBootstrap(cfg, certs)
				if err != nil {
					t.Fatal(err)
				}
				got, want := writeBoth(t, g)
				requireSame(t, "gRPC bootstrap", got, want)
			}
		})
	}
}

// TestAppendJSONRandomValues fills the bootstrap types with random values (every field at
// random zero or set, nil and empty slices and maps, strings with characters JSON escapes,
// floats across the exponent switch, nested dynamic values and raw JSON with whitespace) and
// requires the writer's bytes to be encoding/json's, compact and indented.
func TestAppendJSONRandomValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 16))
	n := 400
	if testing.Short() {
		n = 50
	}
	for i := range n {
		for _, v := range []jsonAppender{new(Bootstrap), new(GRPCBootstrap)} {
			fillRandom(r, reflect.ValueOf(v).Elem(), 0)
			got, want := writeBoth(t, v)
			requireSame(t, "random "+strconv.Itoa(i), got, want)

			w := jsonWriter{}
			v.appendJSON(&w)
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			requireSame(t, "random compact "+strconv.Itoa(i), w.buf, want)
		}
	}
}

// TestAppendJSONCoversEveryField sets every field of every type reachable from the two
// bootstraps, and of the types the render puts in typed_config (no zero values, so no
// omitempty hides a field the writer forgot) and compares.
func TestAppendJSONCoversEveryField(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 16))
	for _, v := range []jsonAppender{new(Bootstrap), new(GRPCBootstrap), new(HTTPConnectionManager), new(TypedStruct), new(SocketAddress)} {
		fillAll(r, reflect.ValueOf(v).Elem(), 0)
		got, want := writeBoth(t, v)
		requireSame(t, reflect.TypeOf(v).String(), got, want)
	}
}

// TestWriterErrorsAsEncodingJSON: what encoding/json refuses (NaN and infinite floats, invalid
// raw JSON) the writer refuses too.
func TestWriterErrorsAsEncodingJSON(t *testing.T) {
	bad := []*Bootstrap{
		{StatsConfig: &StatsConfig{HistogramBucketSettings: []HistogramBucketSettings{{Buckets: []float64{math.NaN()}}}}},
		{StatsConfig: &StatsConfig{HistogramBucketSettings: []HistogramBucketSettings{{Buckets: []float64{math.Inf(-1)}}}}},
		{Node: &Node{Metadata: json.RawMessage(`{"a":}`)}},
		{ClusterManager: &ClusterManager{LoadStatsConfig: json.RawMessage(`{} {}`)}},
		{StaticResources: &StaticResources{Clusters: []Cluster{{TypedExtensionProtocolOptions: map[string]any{"x": math.NaN()}}}}},
	}
	for i, b := range bad {
		if _, err := json.Marshal(b); err == nil {
			t.Fatalf("case %d: encoding/json accepts it", i)
		}
		if _, err := appendIndented(nil, b); err == nil {
			t.Errorf("case %d: writer accepts what encoding/json refuses", i)
		}
	}
}

// TestWriterFallbackKeepsBytes: a dynamic value of a type the writer does not know goes through
// encoding/json and is counted, with the same bytes.
func TestWriterFallbackKeepsBytes(t *testing.T) {
	type odd struct {
		A int8    `json:"a"`
		B []byte  `json:"b"`
		C float32 `json:"c"`
	}
	v := &TypedExtension{Name: "n", TypedConfig: map[string]any{"o": odd{A: -3, B: []byte("<x>"), C: 1e-7}}}
	w := jsonWriter{indent: true}
	v.appendJSON(&w)
	want, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	requireSame(t, "fallback", w.buf, want)
	if w.reflected != 1 {
		t.Errorf("reflected = %d, want 1", w.reflected)
	}
}

// TestWriterDeepNesting: indentation past the writer's precomputed 32 levels, in values and in
// raw JSON.
func TestWriterDeepNesting(t *testing.T) {
	var v any = "leaf"
	raw := `"leaf"`
	for i := range 50 {
		v = map[string]any{"k" + strconv.Itoa(i): v, "e": []any{}}
		raw = `[` + raw + `, {}]`
	}
	m := map[string]any{"v": v, "r": json.RawMessage(raw)}
	want, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	w := jsonWriter{indent: true}
	w.value(m)
	requireSame(t, "deep", w.buf, want)
}

// FuzzJSONWriterScalars: any string, any raw JSON text and any float are written as
// encoding/json writes them, compact and indented.
func FuzzJSONWriterScalars(f *testing.F) {
	f.Add("plain", []byte(`{"a":[1,2,{}],"b":"<&>"}`), 1.5)
	f.Add("\x00\x1f\"\\\b\f\n\r\t<>&\u2028\u2029\x7f\xff\xe2\x80", []byte(" [ ] "), 1e-7)
	f.Add("é😀\xed\xa0\x80", []byte("{ \"k\" : \"\u2028\\u2028\\\"\" , \"e\":{ } }"), 1e21)
	f.Add("", []byte(`"x"`), -0.0)
	f.Fuzz(func(t *testing.T, s string, raw []byte, fl float64) {
		m := map[string]any{s: s, "f": fl, "r": json.RawMessage(raw)}
		for _, indent := range []bool{false, true} {
			var want []byte
			var err error
			if indent {
				want, err = json.MarshalIndent(m, "", "  ")
			} else {
				want, err = json.Marshal(m)
			}
			w := jsonWriter{indent: indent}
			w.mapAny(m)
			if (err == nil) != (w.err == nil) {
				t.Fatalf("indent %v: encoding/json error %v, writer error %v", indent, err, w.err)
			}
			if err == nil {
				requireSame(t, "scalars", w.buf, want)
			}
		}
	})
}

// FuzzRenderConfig renders configurations built from fuzzed environment, annotations, labels
// and ProxyConfig values and requires Render's bytes to be json.MarshalIndent's of the same
// typed bootstrap (and the gRPC bootstrap's and the node metadata's likewise).
func FuzzRenderConfig(f *testing.F) {
	f.Add("reviews-v1", `{"a":1,"b":[true,null,"<x>"]}`, `{"istiocustom":[1,5,10]}`, "app=\"x\"", "my.flag", "7", "10.0.0.5", uint16(15090))
	f.Add("\u2028&", `{"LABELS":{"k":"v"},"NAMESPACE":"ns"}`, `{"p":[1e-7,2.5e21,-0.5]}`, "topology.istio.io/locality=\"r/z/s\"", "", "true", "fd00::1", uint16(1))
	f.Add("x", `{"POD_PORTS":"[{\"containerPort\":80}]","PILOT_SAN":["a"]}`, "", "", "k", "", "10.0.0.5,fd00::5", uint16(65535))
	// One configuration and one directory for the labels and annotations files per fuzzing
	// process (a worker runs one input at a time): a directory made and removed per input was
	// a third of an input's time, and minimising a find (eight string arguments) runs
	// thousands of them.
	base := baseConfig(f)
	var wroteAnn, wroteLabels string // what the two files hold once written by an input
	written := false
	f.Fuzz(func(t *testing.T, workload, metaJSON, buckets, labels, rtKey, rtVal, ips string, port uint16) {
		cfg := base
		cfg.ProxyConfig = proxyconfig.Default()
		cfg.Env = append(slices.Clip(base.Env), "ISTIO_META_WORKLOAD_NAME="+workload, "ISTIO_META_FUZZ="+workload, "ISTIO_METAJSON_FUZZ="+metaJSON)
		cfg.IPs = strings.Split(ips, ",")
		cfg.DualStack = true
		cfg.EnvoyPrometheusPort = int(port)
		cfg.ProxyConfig.RuntimeValues = map[string]string{rtKey: rtVal}
		ann := `sidecar.istio.io/statsHistogramBuckets=` + strconv.Quote(buckets)
		// Minimising a find varies one argument at a time: the files are mostly as they were.
		if !written || ann != wroteAnn {
			must(t, writeTestFile(cfg.AnnotationsFile, ann))
			wroteAnn = ann
		}
		if !written || labels != wroteLabels {
			must(t, writeTestFile(cfg.LabelsFile, labels))
			wroteLabels = labels
		}
		written = true
		if m, err := NodeMetadata(cfg, []string{"10.0.0.5"}); err == nil {
			requireMetadataJSON(t, "fuzzed node metadata", m)
		}
		b, err := Build(t.Context(), cfg)
		if err != nil {
			return // refused input: nothing is written either way
		}
		got, want := writeBoth(t, b)
		requireSame(t, "fuzzed bootstrap", got, want)
		g, err := BuildGRPCBootstrap(cfg, workload)
		if err != nil {
			t.Fatalf("Build accepted the config, BuildGRPCBootstrap refused it: %v", err)
		}
		got, want = writeBoth(t, g)
		requireSame(t, "fuzzed gRPC bootstrap", got, want)
	})
}

// BenchmarkAppendBootstrap is the writer alone on the default bootstrap (built once).
func BenchmarkAppendBootstrap(b *testing.B) {
	bs, err := Build(b.Context(), baseConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, renderBufSize)
	out, _ := appendIndented(buf, bs)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := appendIndented(buf, bs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalIndentBootstrap is encoding/json on the same value, for a same-run ratio.
func BenchmarkMarshalIndentBootstrap(b *testing.B) {
	bs, err := Build(b.Context(), baseConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	out, _ := json.MarshalIndent(bs, "", "  ")
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.MarshalIndent(bs, "", "  "); err != nil {
			b.Fatal(err)
		}
	}
}
