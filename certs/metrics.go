package certs

import (
	"slices"

	"github.com/wingman-mesh/wingman/internal/metric"
)

// metrics are the agent's certificate metrics under Istio's names. Immutable after newMetrics;
// the counters themselves are atomic.
type metrics struct {
	requests     *metric.Counter // istio_agent_num_outgoing_requests{request_type="csr"}
	failures     *metric.Counter // istio_agent_num_failed_outgoing_requests{request_type="csr"}
	latencyMS    *metric.Counter // istio_agent_outgoing_latency{request_type="csr"} (ms, summed)
	retries      *metric.Counter // istio_agent_num_outgoing_retries{request_type="csr"}
	watchFails   *metric.Counter // istio_agent_num_file_watcher_failures_total
	fileFails    *metric.Counter // istio_agent_num_file_secret_failures_total
	sdsRejects   *metric.Counter // istio_agent_pilot_total_xds_rejects{type="sds"}
	badResponses *metric.Counter // istio_agent_wingman_csr_bad_responses_total (Wingman's own)
}

// newMetrics registers the counters (get-or-create, so several managers may share a registry)
// and cert_expiry_seconds, computed by expiry at scrape time.
func newMetrics(reg *metric.Registry, expiry func() map[string]float64) *metrics {
	p := reg.WithPrefix("istio_agent_")
	csr := []string{"request_type", "csr"}
	m := &metrics{
		requests:     p.Counter("num_outgoing_requests", "Outgoing requests to the CA.", csr...),
		failures:     p.Counter("num_failed_outgoing_requests", "Failed outgoing requests to the CA, including unusable responses.", csr...),
		latencyMS:    p.Counter("outgoing_latency", "Summed latency of outgoing CA requests, in milliseconds.", csr...),
		retries:      p.Counter("num_outgoing_retries", "Retried outgoing requests to the CA.", csr...),
		watchFails:   p.Counter("num_file_watcher_failures_total", "Failures to watch certificate files."),
		fileFails:    p.Counter("num_file_secret_failures_total", "Failures to load certificates from files."),
		sdsRejects:   p.Counter("pilot_total_xds_rejects", "SDS responses rejected (NACKed) by Envoy.", "type", "sds"),
		badResponses: p.Counter("wingman_csr_bad_responses_total", "CA responses rejected by the agent (bad chain, SAN, key or validity)."),
	}
	p.Func("cert_expiry_seconds", "Seconds until the certificate expires.", metric.TypeGauge, func(emit func(metric.Sample)) {
		expiries := expiry()
		names := make([]string, 0, len(expiries))
		for name := range expiries {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			emit(metric.Sample{Value: expiries[name], Labels: []string{"resource_name", name}})
		}
	})
	return m
}
