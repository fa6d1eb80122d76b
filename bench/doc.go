// Package bench holds what Wingman's performance is measured against: a reference xDS proxy
// that forwards the way Istio's agent does (every message decoded into
// envoy.service.discovery.v3 types and re-encoded, one new upstream connection per downstream
// stream), and the benchmarks that run it and Wingman's proxy side by side in one process and
// one run, so that every figure comes with its ratio. See README.md for the figures.
package bench
