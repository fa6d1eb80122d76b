package bootstrap

import (
	"fmt"
	"net/netip"
	"strings"
)

// NodeID returns Istio's node id: <type>~<ip>~<pod>.<namespace>~<domain>.
func NodeID(t NodeType, ip, podName, podNamespace, domain string) string {
	return string(t) + "~" + ip + "~" + podName + "." + podNamespace + "~" + domain
}

// ParsedNodeID is a node id split the way Istiod splits it (pilot/pkg/model ParseServiceNodeWithMetadata).
type ParsedNodeID struct {
	Type      NodeType
	IP        string
	ID        string // <pod>.<namespace>
	DNSDomain string
}

// ParseNodeID splits a node id as Istiod does: exactly four `~` fields, a known type, and an IP.
func ParseNodeID(id string) (ParsedNodeID, error) {
	parts := strings.Split(id, "~")
	if len(parts) != 4 {
		return ParsedNodeID{}, fmt.Errorf("node id %q: want 4 fields separated by ~, got %d", id, len(parts))
	}
	t := NodeType(parts[0])
	if !t.Valid() { // Istio: IsApplicationNodeType (pilot/pkg/model/context.go, 1.30.3)
		return ParsedNodeID{}, fmt.Errorf("node id %q: unknown node type %q", id, parts[0])
	}
	if _, err := netip.ParseAddr(parts[1]); err != nil {
		return ParsedNodeID{}, fmt.Errorf("node id %q: IP %q: %w", id, parts[1], err)
	}
	return ParsedNodeID{Type: t, IP: parts[1], ID: parts[2], DNSDomain: parts[3]}, nil
}

// Family is where Envoy's own addresses go for a set of instance IPs, as Istio's bootstrap
// (pkg/bootstrap/config.go, the "Check if nodeIP carries IPv4 or IPv6" branch of
// getNodeMetadataOptions' caller): all IPv4 → 127.0.0.1, 0.0.0.0, V4_ONLY; all IPv6 → ::1, ::,
// V6_ONLY; both families → with dual stack (ISTIO_DUAL_STACK) the first IP's family leads and the
// other one's addresses are the additional ones, DNS lookups ALL; without it the IPv4 values.
// The agent probes Envoy's admin on Localhost.
type Family struct {
	Localhost           string
	Wildcard            string
	DNSLookupFamily     string
	AdditionalLocalhost string // dual stack only
	AdditionalWildcard  string // dual stack only
}

// AddressFamily returns the Family of ips; an unparsable IP counts as neither family.
func AddressFamily(ips []string, dualStack bool) Family {
	v4 := Family{Localhost: "127.0.0.1", Wildcard: "0.0.0.0", DNSLookupFamily: "V4_ONLY"}
	v6 := Family{Localhost: "::1", Wildcard: "::", DNSLookupFamily: "V6_ONLY"}
	var has4, has6 bool
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			if a.Unmap().Is4() {
				has4 = true
			} else {
				has6 = true
			}
		}
	}
	switch {
	case has4 && !has6:
		return v4
	case has6 && !has4:
		return v6
	case !dualStack:
		return v4
	}
	// Istio's network.CheckIPFamilyTypeForFirstIPs: the first IP's family leads.
	lead, other := v4, v6
	if a, err := netip.ParseAddr(ips[0]); err == nil && !a.Unmap().Is4() {
		lead, other = v6, v4
	}
	lead.AdditionalLocalhost, lead.AdditionalWildcard, lead.DNSLookupFamily = other.Localhost, other.Wildcard, "ALL"
	return lead
}

// parseIPs parses the instance IPs; every one must be an IP.
func parseIPs(ips []string) ([]netip.Addr, error) {
	if len(ips) == 0 {
		return nil, fmt.Errorf("IPs: at least one instance IP is required")
	}
	out := make([]netip.Addr, 0, len(ips))
	for i, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("IPs[%d] (INSTANCE_IP or interface address): %q: %w", i, s, err)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}
