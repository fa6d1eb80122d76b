package status

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// MetricPrefix is prepended to every agent metric, as in Istio.
const MetricPrefix = "istio_agent_"

// NewAgentRegistry returns the agent's metrics registry (pass it as Config.Gatherer) and a
// Registerer that adds the istio_agent_ prefix (pass it to every part, and as
// Config.Registerer). Go runtime and process collectors are already registered, so they appear
// as istio_agent_go_* and istio_agent_process_*, as in Istio.
func NewAgentRegistry() (*prometheus.Registry, prometheus.Registerer) {
	reg := prometheus.NewRegistry()
	wrapped := prometheus.WrapRegistererWithPrefix(MetricPrefix, reg)
	wrapped.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg, wrapped
}
