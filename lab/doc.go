// Package lab holds nothing itself: it is the wall around everything the pilot-agent binary does
// not ship. Below it live the stand-ins and tools that tests, the demo and the performance harness
// run the agent against: a real Istio-compatible CA (testca), the one Istiod stand-in
// (controlplane), a local control plane fed from a folder (meshlab, cmd/meshlab), the demo, two
// Envoy stand-ins (envoystub speaks ADS and SDS; envoyproc behaves as Envoy's process does for the
// supervisor), the reference agent (refagent), the process perf runs an agent in (agentchild), perf's process
// floor (floorfwd: TLS in, HTTP/2 DATA out to a Unix socket, nothing else), and
// a user-space netem joining two network namespaces (netem, for perf/faults).
//
// Only lab/, perf/, bench/ and test files may import these packages; cmd/pilot-agent's
// link test and this package's wall test fail when anything else does.
package lab
