// Package metric is the agent's metrics registry: counters, gauges, histograms and
// scrape-time collectors, written in Prometheus' text exposition format (0.0.4), which the
// status server merges with Envoy's. It replaces prometheus/client_golang in the agent (0.5 MB
// of binary and ~0.9 ms of package init, mostly client_model's generated protos and the
// default registry's collectors, for the few dozen series the agent exports).
//
// Registering is get-or-create: asking twice for the same name and constant labels returns the
// same metric, so several instances of a part may share one registry. A name registered with
// two types panics (a programming error). Every method is safe for concurrent use; a nil
// *Registry hands out working metrics that are not exported.
package metric
