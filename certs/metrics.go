package certs

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the agent's certificate metrics under Istio's names. Immutable after newMetrics;
// the collectors themselves are concurrency-safe.
type metrics struct {
	requests     prometheus.Counter // istio_agent_num_outgoing_requests{request_type="csr"}
	failures     prometheus.Counter // istio_agent_num_failed_outgoing_requests{request_type="csr"}
	latencyMS    prometheus.Counter // istio_agent_outgoing_latency{request_type="csr"} (ms, summed)
	retries      prometheus.Counter // istio_agent_num_outgoing_retries{request_type="csr"}
	watchFails   prometheus.Counter // istio_agent_num_file_watcher_failures_total
	fileFails    prometheus.Counter // istio_agent_num_file_secret_failures_total
	sdsRejects   prometheus.Counter // istio_agent_pilot_total_xds_rejects{type="sds"}
	badResponses prometheus.Counter // istio_agent_wingman_csr_bad_responses_total (Wingman's own)
}

func newMetrics(reg prometheus.Registerer, expiry func() map[string]float64) *metrics {
	csr := prometheus.Labels{"request_type": "csr"}
	m := &metrics{
		requests:     counter(reg, "num_outgoing_requests", "Outgoing requests to the CA.", csr),
		failures:     counter(reg, "num_failed_outgoing_requests", "Failed outgoing requests to the CA, including unusable responses.", csr),
		latencyMS:    counter(reg, "outgoing_latency", "Summed latency of outgoing CA requests, in milliseconds.", csr),
		retries:      counter(reg, "num_outgoing_retries", "Retried outgoing requests to the CA.", csr),
		watchFails:   counter(reg, "num_file_watcher_failures_total", "Failures to watch certificate files.", nil),
		fileFails:    counter(reg, "num_file_secret_failures_total", "Failures to load certificates from files.", nil),
		sdsRejects:   counter(reg, "pilot_total_xds_rejects", "SDS responses rejected (NACKed) by Envoy.", prometheus.Labels{"type": "sds"}),
		badResponses: counter(reg, "wingman_csr_bad_responses_total", "CA responses rejected by the agent (bad chain, SAN, key or validity).", nil),
	}
	if reg != nil {
		register(reg, &expiryCollector{
			desc: prometheus.NewDesc("istio_agent_cert_expiry_seconds", "Seconds until the certificate expires.", []string{"resource_name"}, nil),
			f:    expiry,
		})
	}
	return m
}

func counter(reg prometheus.Registerer, name, help string, labels prometheus.Labels) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "istio_agent", Name: name, Help: help, ConstLabels: labels})
	if reg == nil {
		return c
	}
	if got, ok := register(reg, c).(prometheus.Counter); ok {
		return got
	}
	return c
}

// register registers c, or returns the collector already registered under its name, so several
// managers (tests, the perf harness) may share one registry.
func register(reg prometheus.Registerer, c prometheus.Collector) prometheus.Collector {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector
		}
	}
	return c
}

// expiryCollector reports cert_expiry_seconds per resource, computed at scrape time.
type expiryCollector struct {
	desc *prometheus.Desc          // immutable
	f    func() map[string]float64 // concurrency-safe
}

func (e *expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- e.desc }
func (e *expiryCollector) Collect(ch chan<- prometheus.Metric) {
	for name, v := range e.f() {
		ch <- prometheus.MustNewConstMetric(e.desc, prometheus.GaugeValue, v, name)
	}
}
