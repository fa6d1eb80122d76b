package status

import "net/netip"

// ProbeTarget is where application probes are sent, by the rule of Istio's status
// NewServer (pilot/cmd/pilot-agent/status/server.go, appProbersDestination): "localhost" with
// REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION, otherwise the pod IP as given in INSTANCE_IP
// (NewStatusServerOptions passes that variable, not a discovered address), as kubelet
// would probe it. Without INSTANCE_IP Istio dials ":port", the local system; "" here means
// the same (the prober's default, "localhost").
func ProbeTarget(instanceIP netip.Addr, legacyLocalhost bool) string {
	if legacyLocalhost {
		return "localhost"
	}
	if !instanceIP.IsValid() {
		return ""
	}
	return instanceIP.String()
}
