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
// The large-push scenarios also run lab/floorfwd, the process floor (TLS from the control plane,
// HTTP/2 DATA copied to the stand-in's Unix socket, nothing else), as a pod of its own between
// the two agents, and report Wingman / floor per run beside Wingman / reference (floor_ratios in
// the baseline gate the binary's CPU per MB against it). Binary pods carry perf/testdata's
// image-sized bootstrap template at Istio's path, which the binary renders as a user's image
// makes it. With Config.Profile the large scenarios push for ProfileSeconds and the binary's CPU
// profile is taken from its status port over exactly those pushes.
//
// Everything the harness starts runs in its own process group and is stopped (SIGTERM, then
// SIGKILL to the group) when a scenario ends, fails or times out; errors name the failed step.
package perf
