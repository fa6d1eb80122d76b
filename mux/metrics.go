package mux

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/internal/metric"
)

// metrics are the proxy's counters, with Istio's names. Immutable after newMetrics; the
// counters themselves are atomic.
type metrics struct {
	requests, responses *metric.Counter
	upFailures          *metric.Counter
	upTerms, downTerms  *metric.CounterVec
}

func newMetrics(reg *metric.Registry) *metrics {
	return &metrics{
		requests:   reg.Counter("istio_agent_xds_proxy_requests", "Requests forwarded from clients to Istiod."),
		responses:  reg.Counter("istio_agent_xds_proxy_responses", "Responses forwarded from Istiod to clients."),
		upFailures: reg.Counter("istio_agent_istiod_connection_failures", "Failed attempts to open an upstream stream to Istiod."),
		upTerms:    reg.CounterVec("istio_agent_istiod_connection_terminations", "Upstream streams to Istiod that ended.", "type"),
		downTerms:  reg.CounterVec("istio_agent_envoy_connection_terminations", "Client streams that ended.", "type"),
	}
}

func (m *metrics) downTerm(kind string) { m.downTerms.With(kind).Inc() }

func (m *metrics) upTerm(err error) {
	kind := "error"
	if s, ok := status.FromError(err); ok && s.Code() == codes.Canceled || errors.Is(err, errClientDone) {
		kind = "cancelled"
	}
	m.upTerms.With(kind).Inc()
}
