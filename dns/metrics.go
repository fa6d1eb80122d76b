package dns

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are Istio's DNS proxy metrics (pkg/dns/client/monitoring.go). Immutable after
// New; the collectors are safe for concurrent use and record without allocating.
type metrics struct {
	requests         prometheus.Counter
	upstreamRequests prometheus.Counter
	upstreamFailures prometheus.Counter
	upstreamDuration prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "istio_agent", Name: "dns_requests_total",
			Help: "DNS queries received by the agent's DNS proxy.",
		}),
		upstreamRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "istio_agent", Name: "dns_upstream_requests_total",
			Help: "DNS queries the agent forwarded to upstream nameservers.",
		}),
		upstreamFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "istio_agent", Name: "dns_upstream_failures_total",
			Help: "Forwarded DNS queries that got no usable upstream reply (answered SERVFAIL).",
		}),
		upstreamDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "istio_agent", Name: "dns_upstream_request_duration_seconds",
			Help:    "Time taken by forwarded DNS queries, in seconds.",
			Buckets: []float64{.001, .005, .01, .1, 1, 5},
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.upstreamRequests, m.upstreamFailures, m.upstreamDuration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("dns: register metrics: %w", err)
		}
	}
	return m, nil
}
