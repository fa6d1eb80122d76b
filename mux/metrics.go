package mux

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// metrics are the proxy's counters, with Istio's names. Immutable after newMetrics; the
// counters themselves are atomic.
type metrics struct {
	requests, responses prometheus.Counter
	upFailures          prometheus.Counter
	upTerms, downTerms  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests:   prometheus.NewCounter(prometheus.CounterOpts{Name: "istio_agent_xds_proxy_requests", Help: "Requests forwarded from clients to Istiod."}),
		responses:  prometheus.NewCounter(prometheus.CounterOpts{Name: "istio_agent_xds_proxy_responses", Help: "Responses forwarded from Istiod to clients."}),
		upFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "istio_agent_istiod_connection_failures", Help: "Failed attempts to open an upstream stream to Istiod."}),
		upTerms:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "istio_agent_istiod_connection_terminations", Help: "Upstream streams to Istiod that ended."}, []string{"type"}),
		downTerms:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "istio_agent_envoy_connection_terminations", Help: "Client streams that ended."}, []string{"type"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.responses, m.upFailures, m.upTerms, m.downTerms} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) downTerm(kind string) { m.downTerms.WithLabelValues(kind).Inc() }

func (m *metrics) upTerm(err error) {
	kind := "error"
	if s, ok := status.FromError(err); ok && s.Code() == codes.Canceled || errors.Is(err, errClientDone) {
		kind = "cancelled"
	}
	m.upTerms.WithLabelValues(kind).Inc()
}
