package bootstrap

import (
	"strings"
	"testing"
)

// TestTemplateFuncs runs each function through text/template, with the argument order sprig
// documents (masterminds.github.io/sprig) and Istio's toJSON behaviour (pkg/bootstrap/instance.go).
func TestTemplateFuncs(t *testing.T) {
	params := map[string]any{
		"s": "Hello", "empty": "", "n": 0, "list": []string{"a", "b"}, "m": map[string]any{"k": "v"},
		"nilv": nil, "f": 2.7, "t": true, "ch": make(chan int),
	}
	cases := map[string]string{
		`{{ toJSON .m }}`:                                       `{"k":"v"}`,
		`{{ toJSON .nilv }}`:                                    `{}`,
		`{{ toJSON .ch }}`:                                      `{}`,
		`{{ toJson .list }}`:                                    `["a","b"]`,
		`{{ toJson .ch }}`:                                      ``,
		`{{ toPrettyJson .m }}`:                                 "{\n  \"k\": \"v\"\n}",
		`{{ default "d" .empty }}`:                              `d`,
		`{{ default "d" .s }}`:                                  `Hello`,
		`{{ .empty | default "p" }}`:                            `p`,
		`{{ default "d" .n }}`:                                  `d`,
		`{{ empty .list }}|{{ empty .n }}`:                      `false|true`,
		`{{ empty .m }}|{{ empty .nilv }}`:                      `false|true`,
		`{{ coalesce .empty .n .s }}`:                           `Hello`,
		`{{ ternary "y" "n" .t }}`:                              `y`,
		`{{ ternary "y" "n" false }}`:                           `n`,
		`{{ toString .f }}`:                                     `2.7`,
		`{{ quote .s .nilv 3 }}`:                                `"Hello" "3"`,
		`{{ squote .s }}`:                                       `'Hello'`,
		`{{ trim "  x " }}`:                                     `x`,
		`{{ trimPrefix "He" .s }}`:                              `llo`,
		`{{ trimSuffix "lo" .s }}`:                              `Hel`,
		`{{ upper .s }}{{ lower .s }}`:                          `HELLOhello`,
		`{{ replace "l" "L" .s }}`:                              `HeLLo`,
		`{{ contains "ell" .s }}`:                               `true`,
		`{{ hasPrefix "He" .s }}`:                               `true`,
		`{{ hasSuffix "x" .s }}`:                                `false`,
		`{{ splitList "," "a,b" | join "+" }}`:                  `a+b`,
		`{{ join "," .list }}`:                                  `a,b`,
		`{{ join "," .s }}`:                                     `Hello`,
		`{{ indent 2 "a\nb" }}`:                                 "  a\n  b",
		`{{ nindent 1 "a" }}`:                                   "\n a",
		`{{ b64enc .s }}`:                                       `SGVsbG8=`,
		`{{ b64dec "SGVsbG8=" }}`:                               `Hello`,
		`{{ atoi "42" }}|{{ atoi "x" }}`:                        `42|0`,
		`{{ int "7" }}|{{ int .f }}`:                            `7|2`,
		`{{ len (list 1 2 3) }}`:                                `3`,
		`{{ toJson (dict "a" 1 "b") }}`:                         `{"a":1,"b":null}`,
		`{{ hasKey .m "k" }}|{{ get .m "k" }}|{{ get .m "z" }}`: `true|v|`,
	}
	for src, want := range cases {
		got, err := executeTemplate("t", src, params)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s = %q, want %q", src, got, want)
		}
	}
	if got, err := executeTemplate("t", `{{ len (indent 999999999 "") }}`, params); err != nil || string(got) != "4096" {
		t.Errorf("indent is not bounded: %s %v", got, err)
	}
	if _, err := executeTemplate("t", `{{ mustToJson .ch }}`, params); err == nil {
		t.Error("mustToJson of a channel: no error")
	}
	if _, err := executeTemplate("t", `{{ sha256sum .s }}`, params); err == nil || !strings.Contains(err.Error(), "sha256sum") {
		t.Errorf("unknown function: %v", err)
	}
}

// TestTemplateParamCheck: a top-level parameter the parameter set does not hold is listed once,
// naming it and its line, and the template still runs, the missing key rendering as Go's
// text/template renders it with default options ("<no value>" when printed, false in if), as
// Istio's agent runs its templates (instance.go newTemplate sets no missingkey option at any
// supported tag); dot inside range and with is not the parameter map and is not looked at.
func TestTemplateParamCheck(t *testing.T) {
	params := map[string]any{"a": "x", "items": []map[string]string{{"name": "n"}}, "obj": map[string]any{"inner": 1}}
	known := func(n string) bool { _, ok := params[n]; return ok }
	ok := []string{
		`{{ .a }}`,
		`{{ range .items }}{{ .name }}{{ end }}`,
		`{{ with .obj }}{{ .inner }}{{ end }}`,
		`{{ range .items }}{{ $.a }}{{ end }}`,
		`{{ if .a }}{{ .a }}{{ else }}{{ .a }}{{ end }}`,
		`{{ define "x" }}{{ .whatever }}{{ end }}{{ template "x" .obj }}`,
	}
	for _, src := range ok {
		if _, unknown, err := executeTemplateFor("t", src, params, known); err != nil || len(unknown) != 0 {
			t.Errorf("%s: %v %v", src, unknown, err)
		}
	}
	for _, tc := range []struct{ src, name, loc, out string }{
		{`{{ .nope }}{{ .nope }}`, "nope", "t:1:3", "<no value><no value>"},
		{"line1\n{{ if .a }}{{ .gone }}{{ end }}", "gone", "t:2:", "line1\n<no value>"},
		{`{{ range .items }}{{ $.missing }}{{ end }}`, "missing", "t:1:", "<no value>"},
		{`{{ with .obj }}{{ else }}{{ .other }}{{ end }}`, "other", "t:1:", ""},
		{`{{ if .absent }}yes{{ else }}no{{ end }}`, "absent", "t:1:", "no"},
	} {
		out, unknown, err := executeTemplateFor("t", tc.src, params, known)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if len(unknown) != 1 || unknown[0].Name != tc.name || !strings.HasPrefix(unknown[0].Location, tc.loc) {
			t.Errorf("%s: unknown %+v, want one %q at %s", tc.src, unknown, tc.name, tc.loc)
		}
		if string(out) != tc.out {
			t.Errorf("%s: rendered %q, want %q", tc.src, out, tc.out)
		}
	}
}

// FuzzRenderTemplate executes arbitrary custom templates over a real parameter set: text/template
// and our functions must fail with an error, never panic or hang.
func FuzzRenderTemplate(f *testing.F) {
	for _, s := range []string{
		`{{ .nodeID }}`, `{{ toJson .metadata }}`, `{{ range .inclusionPrefix }}{{ . }}{{ end }}`,
		`{{ default "x" .zipkin | quote }}`, `{{ .config.ProxyAdminPort }}`, `{{ dict "a" }}`,
		`{{ indent -3 .cluster }}`, `{{ int .config }}`, `{{ join "," .metadata }}`,
	} {
		f.Add(s)
	}
	st, err := newState(baseConfig(f))
	if err != nil {
		f.Fatal(err)
	}
	params, err := st.templateParams(f.Context())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 2000 || strings.Contains(src, "range") && strings.ContainsAny(src, "0123456789") {
			t.Skip() // ranging over large integers only takes long
		}
		_, _ = executeTemplate("fuzz", src, params)
	})
}

func TestSANMatchers(t *testing.T) {
	if got := sanMatchers([]string{"istiod.istio-system.svc", `q"x`}); got != `[{"exact":"istiod.istio-system.svc"},{"exact":"q\"x"}]` {
		t.Errorf("got %s", got)
	}
	if got := sanMatchers(nil); got != `[]` {
		t.Errorf("nil: %s", got)
	}
}
