package meshlab

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are meshlab's own counters; nil-safe (no Registerer → no metrics). Immutable after
// newMetrics; the collectors are safe for concurrent use.
type metrics struct {
	loads  *prometheus.CounterVec
	pushes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshlab_resource_loads_total", Help: "Loads of the resources folder, by result (accepted, rejected).",
		}, []string{"result"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshlab_xds_pushes_total", Help: "xDS responses sent, by type URL.",
		}, []string{"type"}),
	}
	for _, c := range []prometheus.Collector{m.loads, m.pushes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("meshlab: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) load(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.loads.WithLabelValues("accepted").Inc()
	} else {
		m.loads.WithLabelValues("rejected").Inc()
	}
}

func (m *metrics) push(typeURL string) {
	if m == nil {
		return
	}
	m.pushes.WithLabelValues(typeURL).Inc()
}
