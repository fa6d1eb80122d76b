// Package perf is Wingman's end-to-end performance harness. It starts a control plane
// (lab/controlplane: go-control-plane's xDS server over one LinearCache per type, plus the
// Istio-compatible CA of lab/testca, behind TLS and a bearer-token check), runs agents the way a
// node does — the real pilot-agent binary, or an agent child process (lab/agentchild) running
// Wingman's mux or the reference proxy of lab/refagent — each with the Envoy stand-in of
// lab/envoystub, and measures push latency (through the agent and direct), time to first config and
// certificate, agent memory (RssAnon and PSS, judged; VmRSS, for information) and CPU (schedstat),
// and allocations where the agent
// exposes them (the binary through the MemStats of its pprof index). Wingman and the reference run
// interleaved, run by run, so every figure comes with its ratio; the report (markdown and SVG) and
// the gate against baseline.json use ratios, allocation counts and sizes only (idle anonymous memory
// and PSS of the real binary, the binary's size), never absolute times. The startup scenario times process start
// → the stand-in's main package (wall time, reported) and reads the agent's CPU time at that
// instant (exec_cpu_ms, gated as a ratio to the reference's).
//
// Everything the harness starts runs in its own process group and is stopped (SIGTERM, then
// SIGKILL to the group) when a scenario ends, fails or times out; errors name the failed step.
package perf
