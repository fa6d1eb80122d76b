package bootstrap

import (
	"testing"

	"github.com/wingman-mesh/wingman/bootstrap/envoyproto"
)

// BenchmarkRenderImageSizedTemplate renders the perf harness's image-sized template (our own,
// every parameter of Istio's set, 26 KB: perf/testdata/envoy_bootstrap_tmpl.json) as the binary
// does at start-up; B/op is what the render leaves for the collector (issue 30: 712 KB before
// the JSON check stopped building the document and pod info stopped taking 64 KiB buffers,
// 365 KB after).
func BenchmarkRenderImageSizedTemplate(b *testing.B) {
	var cfg Config
	for _, c := range parityCases(b) {
		cfg = c
		break
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderTemplate(b.Context(), cfg, "../perf/testdata/envoy_bootstrap_tmpl.json"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestImageSizedTemplateRenders: the perf harness's template renders and validates against
// Envoy's schema for every parity input set, so the perf figures are of a bootstrap Envoy takes.
func TestImageSizedTemplateRenders(t *testing.T) {
	for name, cfg := range parityCases(t) {
		out, err := RenderTemplate(t.Context(), cfg, "../perf/testdata/envoy_bootstrap_tmpl.json")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range envoyproto.Validate(out) {
			t.Errorf("%s: Envoy validation: %s", name, f)
		}
	}
}
