package dns

import "github.com/wingman-mesh/wingman/internal/metric"

// metrics are Istio's DNS proxy metrics (pkg/dns/client/monitoring.go). Immutable after
// New; the collectors are safe for concurrent use and record without allocating.
type metrics struct {
	requests         *metric.Counter
	upstreamRequests *metric.Counter
	upstreamFailures *metric.Counter
	upstreamDuration *metric.Histogram
}

func newMetrics(reg *metric.Registry) *metrics {
	return &metrics{
		requests: reg.Counter("istio_agent_dns_requests_total",
			"DNS queries received by the agent's DNS proxy."),
		upstreamRequests: reg.Counter("istio_agent_dns_upstream_requests_total",
			"DNS queries the agent forwarded to upstream nameservers."),
		upstreamFailures: reg.Counter("istio_agent_dns_upstream_failures_total",
			"Forwarded DNS queries that got no usable upstream reply (answered SERVFAIL)."),
		upstreamDuration: reg.Histogram("istio_agent_dns_upstream_request_duration_seconds",
			"Time taken by forwarded DNS queries, in seconds.", []float64{.001, .005, .01, .1, 1, 5}),
	}
}
