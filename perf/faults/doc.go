// Package faults runs the real pilot-agent binary through network faults (issue 23 item 4): the
// agent and the Envoy stand-in (lab/envoystub) in one network namespace, the control plane
// (lab/controlplane, go-control-plane over LinearCaches, with lab/testca's CA on the same TLS
// port) in another, joined by lab/netem's user-space link, since this kernel has no tc netem
// (see lab/netem). Each scenario of TestFaults injects one fault, waits for the events that show
// the agent survived it (pushes the stand-in reports, connection attempts the link sees) and
// prints its figures; `make faults` runs them and the closing log gives them as a table.
// last_state and last_state_off (issue 31, laststate_test.go) kill the agent and the stand-in
// and start them again in the same directory, its ./etc/istio/proxy a tmpfs (restart.go);
// last_state's agent proxies DNS, and its DNS proxy is asked for a mesh name with Istiod down.
// last_state_ack_window restarts the stand-in holding its answers (PERF_ACK_HOLD) and brings
// Istiod back, having dropped a cluster, while the restored Delta CDS is unACKed; the control
// plane's callbacks show the agent's replay and Istiod's first response, and only then is the
// stand-in released (SIGUSR2).
//
// The rig lives here rather than in perf because perf compares agents with each other over
// loopback, while every fault needs namespaces, root and a link this package controls; the
// netns and TUN helpers are lab/netem, a lab part like the control plane and the CA.
package faults
