package status

import "net/netip"

// AdminLocalhost is where Istio's agent reads Envoy's admin API for readiness
// (pilot/cmd/pilot-agent/status/server.go NewServer at 1.30.3, unchanged on master): "::1" when the
// proxy is IPv6-only (every proxy IP IPv6: pkg/model DiscoverIPMode), or else when INSTANCE_IP is an
// IPv6 address that is not link-local unicast, as in a dual-stack pod whose first address is IPv6;
// "127.0.0.1" otherwise. The bootstrap puts Envoy's admin listener on the same loopback for those
// pods (pkg/bootstrap config.go's address family). One pod they disagree on, in Istio too: an
// IPv6 INSTANCE_IP with IPv4 addresses as well and ISTIO_DUAL_STACK unset puts the admin on
// 127.0.0.1 while readiness reads ::1, so Istio's agent never becomes ready there; Wingman does the
// same rather than differ.
func AdminLocalhost(ipv6Only bool, instanceIP string) string {
	if ipv6Only {
		return "::1"
	}
	// net.ParseIP(...).To4() == nil && To16() != nil: an address that is not IPv4 or IPv4-mapped.
	if a, err := netip.ParseAddr(instanceIP); err == nil && !a.Unmap().Is4() && !a.IsLinkLocalUnicast() {
		return "::1"
	}
	return "127.0.0.1"
}
