package status

import "github.com/wingman-mesh/wingman/internal/metric"

// MetricPrefix is prepended to every agent metric, as in Istio.
const MetricPrefix = "istio_agent_"

// NewAgentRegistry returns the agent's metrics registry (pass it as Config.Gatherer) and its
// view that adds the istio_agent_ prefix (pass it as Config.Registerer). The Go runtime and
// process families are already registered, so they appear as istio_agent_go_* and
// istio_agent_process_*, as in Istio.
func NewAgentRegistry() (reg, prefixed *metric.Registry) {
	reg = metric.NewRegistry()
	prefixed = reg.WithPrefix(MetricPrefix)
	metric.RegisterRuntime(prefixed)
	return reg, prefixed
}
