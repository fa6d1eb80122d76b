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
	if t != Sidecar && t != Router {
		return ParsedNodeID{}, fmt.Errorf("node id %q: unknown node type %q", id, parts[0])
	}
	if _, err := netip.ParseAddr(parts[1]); err != nil {
		return ParsedNodeID{}, fmt.Errorf("node id %q: IP %q: %w", id, parts[1], err)
	}
	return ParsedNodeID{Type: t, IP: parts[1], ID: parts[2], DNSDomain: parts[3]}, nil
}

// ipMode is what the instance IPs say about address families.
type ipMode struct {
	ipv6First bool // the first IP is IPv6: IPv6 loopback and wildcard
	dual      bool // both families present
}

func parseIPs(ips []string) ([]netip.Addr, ipMode, error) {
	if len(ips) == 0 {
		return nil, ipMode{}, fmt.Errorf("IPs: at least one instance IP is required")
	}
	out := make([]netip.Addr, 0, len(ips))
	var v4, v6 bool
	for i, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, ipMode{}, fmt.Errorf("IPs[%d] (INSTANCE_IP or interface address): %q: %w", i, s, err)
		}
		a = a.Unmap()
		if a.Is4() {
			v4 = true
		} else {
			v6 = true
		}
		out = append(out, a)
	}
	return out, ipMode{ipv6First: out[0].Is6(), dual: v4 && v6}, nil
}
