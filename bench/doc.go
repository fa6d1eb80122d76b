// Package bench holds the same-run benchmarks and gates of Wingman's xDS proxy against the
// reference (lab/refagent, which forwards the way Istio's agent does: every message decoded
// into envoy.service.discovery.v3 types and re-encoded, one new upstream connection per
// downstream stream), so that every figure comes with its ratio. See README.md for the figures.
package bench
