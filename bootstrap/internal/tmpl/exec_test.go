package tmpl

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

type point struct {
	X, Y   int
	Name   string
	hidden int
	Inner  *point
	Tags   []string
}

type named string

func (n named) String() string { return "named:" + string(n) }

type errVal struct{ msg string }

func (e *errVal) Error() string { return "err:" + e.msg }

var testFuncs = map[string]any{
	"upper":  strings.ToUpper,
	"join":   func(sep string, l []string) string { return strings.Join(l, sep) },
	"pair":   func(a, b any) string { return fmt.Sprint(a, "+", b) },
	"fail":   func() (string, error) { return "", errors.New("boom") },
	"ints":   func(n int) []int { return make([]int, n) },
	"toJSON": func(v any) (string, error) { return fmt.Sprintf("%v", v), nil },
	"adder":  func() func(int, int) int { return func(a, b int) int { return a + b } },
}

// testData is shaped like the bootstrap parameters: a map of strings, numbers, bools, lists, a
// generated protobuf message, plain structs, Stringers and nils.
func testData() map[string]any {
	pc := &meshv1alpha1.ProxyConfig{
		ConfigPath: "./etc/istio/proxy", ProxyAdminPort: 15000, StatusPort: 15020,
		DrainDuration:                   durationpb.New(45e9),
		Tracing:                         &meshv1alpha1.Tracing{Tracer: &meshv1alpha1.Tracing_Zipkin_{Zipkin: &meshv1alpha1.Tracing_Zipkin{Address: "zipkin:9411"}}},
		ProxyMetadata:                   map[string]string{"B": "2", "A": "1"},
		HoldApplicationUntilProxyStarts: wrapperspb.Bool(true),
	}
	_ = pc.String() // sets the message's lazily-initialised state, so both executions print the same
	return map[string]any{
		"nodeID":    "sidecar~10.0.0.1~a.b~b.svc.cluster.local",
		"cluster":   "a.b",
		"region":    "r1",
		"zone":      "",
		"port":      15020,
		"u8":        uint8(7),
		"f":         1.5,
		"yes":       true,
		"no":        false,
		"list":      []string{"a", "b", "c"},
		"empty":     []string{},
		"ints":      []int{3, 1, 2},
		"m":         map[string]int{"z": 26, "a": 1, "m": 13},
		"im":        map[int]string{3: "c", 1: "a", 2: "b"},
		"nested":    map[string]any{"k": map[string]any{"deep": "v"}, "n": nil},
		"config":    pc,
		"nilconfig": (*meshv1alpha1.ProxyConfig)(nil),
		"pt":        &point{X: 1, Y: 2, Name: "p", Tags: []string{"t"}, Inner: &point{X: 9}},
		"ptv":       point{X: 5},
		"nilpt":     (*point)(nil),
		"named":     named("n"),
		"err":       &errVal{"e"},
		"nil":       nil,
		"json":      `{"a":1}`,
	}
}

var corpus = []string{
	`plain text`,
	`{{.nodeID}} {{.cluster}} {{.missing}} {{.nested.k.deep}} {{.nested.n}} {{.nested.none.x}}`,
	`{{if .region}}"region": "{{.region}}"{{end}}{{if .zone}},zone{{else}}no zone{{end}}`,
	`{{- if or .region .zone }} either {{- end }}{{ if and .region .zone }}both{{ else if .yes }}yes{{ end }}`,
	`{{range $i, $s := .list}}{{$i}}={{$s}},{{end}}{{range .empty}}x{{else}}none{{end}}`,
	`{{range $k, $v := .m}}{{$k}}:{{$v}} {{end}}{{range .im}}{{.}}{{end}}{{range $k, $v := .im}}{{$k}}{{end}}`,
	`{{range .list}}{{if eq . "b"}}{{break}}{{end}}{{.}}{{end}}|{{range .list}}{{if eq . "b"}}{{continue}}{{end}}{{.}}{{end}}`,
	`{{range 3}}{{.}}{{end}}{{range $i := 2}}[{{$i}}]{{end}}{{range .nil}}x{{else}}nil-range{{end}}`,
	`{{with .pt}}{{.X}},{{.Y}},{{.Name}},{{.Inner.X}},{{.Inner.Inner}}{{end}}{{with .zone}}z{{else with .region}}{{.}}{{end}}`,
	`{{.config.ProxyAdminPort}} {{.config.ConfigPath}}/XDS {{.config.StatusPort}} {{.config.DrainDuration}}`,
	`{{.config.GetProxyAdminPort}} {{.config.GetTracing.GetZipkin.GetAddress}} {{.config.Tracing.GetZipkin.Address}}`,
	`{{.config.GetTracing.GetDatadog}} {{if .config.GetTracing.GetLightstep}}ls{{else}}no ls{{end}} {{.nilconfig.GetConfigPath}}|`,
	`{{.config.ProxyMetadata}} {{range $k, $v := .config.ProxyMetadata}}{{$k}}={{$v}};{{end}} {{.config.HoldApplicationUntilProxyStarts.Value}}`,
	`{{.config.String | printf "%.10s"}} {{.named}} {{.named.String}} {{.err}} {{.err.Error}}`,
	`{{$x := .port}}{{$x}} {{$x = 5}}{{$x}} {{$ := .}}{{$.cluster}} {{with $y := .list}}{{$y}}{{end}}`,
	`{{len .list}} {{len .m}} {{index .list 1}} {{index .m "z"}} {{index .m "nope"}} {{index .im 2}} {{slice .list 1 2}} {{slice "abcdef" 2}}`,
	`{{printf "%d-%s-%v-%q" .port .cluster .yes .nodeID}} {{print 1 2 "a" "b" 3.5}} {{println .list}}`,
	`{{eq .port 15020}} {{ne .cluster "x"}} {{lt 1 2}} {{le 2 2}} {{gt .u8 3}} {{ge .f 1.5}} {{eq .u8 7}} {{eq .cluster "a" "a.b"}} {{eq .nil .nil}}`,
	`{{html "<a&b>"}} {{js "it's \"q\" <x>"}} {{urlquery "a b&c" .port}} {{not .yes}} {{not .empty}}`,
	`{{upper .cluster}} {{.cluster | upper}} {{join "," .list}} {{.list | join "-"}} {{pair 1 "x"}} {{pair .nil .port}}`,
	`{{toJSON .list}} {{toJSON .m}} {{call adder 1 2}} {{ 0x10 }} {{ 1e3 }} {{ 'a' }} {{ -5 }} {{ 1.0 }} {{ 2i }}`,
	`{{define "T"}}[{{.}}]{{end}}{{template "T" .cluster}}{{template "T"}}{{block "B" .port}}<{{.}}>{{end}}`,
	`{{/* comment */}}{{- .cluster -}}  {{"str"}} {{true}} {{.}}`,
	`{{.ptv.X}} {{.ptv}} {{.pt.Tags}} {{.pt}} {{.nilpt}}`,
	`{{.nilpt.X}}`,
	`{{fail}}`,
	`{{.cluster.Foo}}`,
	`{{.pt.hidden}}`,
	`{{nil}}`,
	`{{index .list 10}}`,
	`{{template "nope"}}`,
	`{{.port 1}}`,
	`{{len .port}}`,
	`{{lt .yes .no}}`,
	`{{eq .list .list}}`,
	`{{range .port}}{{.}}{{end}}`,
	`{{range $a, $b := 3}}{{end}}`,
	`{{slice .list 2 1}}`,
	`{{upper 3}}`,
	`{{.config.GetNoSuchField}}`,
	`{{.config.Tracing.Zipkin}}`,
	`{{(.pt).Inner.X}} {{(index .list 0)}} {{ (print "x") | printf "%s!" }}`,
	`{{define "x"}}y{{end}}`,
	``,
	`{{and 1 0 "x"}} {{or 0 "" "y"}} {{and .yes .cluster}} {{or .no}} {{.yes | and true}} {{.no | or false}}`,
}

// TestMatchesTextTemplate runs the corpus through text/template (missingkey=zero) and this
// executor: the outputs must be identical, and one must fail where the other does.
func TestMatchesTextTemplate(t *testing.T) {
	for _, src := range corpus {
		compare(t, src, true)
	}
}

func compare(t *testing.T, src string, strict bool) {
	t.Helper()
	data := testData()
	ref, err := template.New("t").Funcs(template.FuncMap(testFuncs)).Option("missingkey=zero").Parse(src)
	if err != nil {
		if _, err2 := Parse("t", src, testFuncs); err2 == nil {
			t.Fatalf("%q: text/template refuses to parse (%v), this executor accepts", src, err)
		}
		return
	}
	var want, got limitedBuffer
	wantErr := ref.Execute(&want, data)
	mine, err := Parse("t", src, testFuncs)
	if err != nil {
		t.Fatalf("%q: parse: %v", src, err)
	}
	gotErr := mine.Execute(&got, data)
	switch {
	case wantErr == nil && gotErr != nil:
		t.Fatalf("%q: text/template gives %q, this executor fails: %v", src, want.String(), gotErr)
	case wantErr != nil && gotErr == nil && (strict || !errors.Is(wantErr, errTooLong)):
		t.Fatalf("%q: text/template fails (%v), this executor gives %q", src, wantErr, got.String())
	case wantErr == nil && want.String() != got.String():
		t.Fatalf("%q:\ntext/template: %q\nthis executor: %q", src, want.String(), got.String())
	}
	if strict && wantErr != nil {
		t.Logf("%q: both fail; text/template: %v; here: %v", src, wantErr, gotErr)
	}
}

var errTooLong = errors.New("output too long")

// limitedBuffer bounds what a fuzzed template may write.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > 1<<16 {
		return 0, errTooLong
	}
	return b.Buffer.Write(p)
}

func TestParseErrors(t *testing.T) {
	for _, src := range []string{`{{`, `{{.a`, `{{end}}`, `{{range}}`, `{{nosuchfunc}}`, `{{break}}`} {
		if _, err := Parse("bad", src, nil); err == nil {
			t.Errorf("%q: no parse error", src)
		}
	}
	if _, err := Parse("bad", "x", map[string]any{"f": 3}); err == nil {
		t.Error("a non-function in funcs was accepted")
	}
	if _, err := Parse("bad", "x", map[string]any{"f": func() (int, int) { return 0, 0 }}); err == nil {
		t.Error("a function whose second result is not error was accepted")
	}
}

// bigNumber matches number literals that could make a fuzzed range run for long.
var bigNumber = regexp.MustCompile(`[0-9][0-9a-fA-FxXoObB_.pP+\-]{2,}`)

func FuzzExecute(f *testing.F) {
	for _, src := range corpus {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 2000 || (strings.Contains(src, "range") && bigNumber.MatchString(src)) ||
			strings.Contains(src, "template") || strings.Contains(src, "block") {
			t.Skip() // long loops and deep recursion: both executors only take long to fail
		}
		compare(t, src, false)
	})
}
