package metric

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestPrometheusParsesOutput: Prometheus' own text parser (a test-only dependency) reads what
// the registry writes, with the types and values written.
func TestPrometheusParsesOutput(t *testing.T) {
	r := NewRegistry()
	p := r.WithPrefix("istio_agent_")
	RegisterRuntime(p)
	p.Counter("num_outgoing_requests", "Outgoing requests.", "request_type", "csr").Add(3)
	p.CounterVec("scrape_failures_total", "Failed scrapes.", "type").With(`we"ird\value`).Inc()
	h := p.Histogram("dns_upstream_request_duration_seconds", "Time.", []float64{.001, .005, .01, .1, 1, 5})
	h.Observe(0.02)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text(t, r)))
	if err != nil {
		t.Fatalf("Prometheus cannot parse the output: %v", err)
	}
	if f := fams["istio_agent_num_outgoing_requests"]; f == nil || f.GetMetric()[0].GetCounter().GetValue() != 3 {
		t.Errorf("counter: %v", f)
	}
	if f := fams["istio_agent_scrape_failures_total"]; f == nil || f.GetMetric()[0].GetLabel()[0].GetValue() != `we"ird\value` {
		t.Errorf("escaped label: %v", f)
	}
	if f := fams["istio_agent_dns_upstream_request_duration_seconds"]; f == nil || f.GetMetric()[0].GetHistogram().GetSampleCount() != 1 ||
		f.GetMetric()[0].GetHistogram().GetBucket()[3].GetCumulativeCount() != 1 {
		t.Errorf("histogram: %v", f)
	}
	if f := fams["istio_agent_go_gc_duration_seconds"]; f == nil || len(f.GetMetric()[0].GetSummary().GetQuantile()) != 5 {
		t.Errorf("summary: %v", f)
	}
	if len(fams) < 30 {
		t.Errorf("only %d families parsed", len(fams))
	}
}
