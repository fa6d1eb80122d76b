// Package capture programs a sidecar's traffic capture: the netfilter rules that send an
// application's outbound TCP to Envoy's outbound port, inbound TCP to Envoy's inbound port and,
// when asked, DNS to the agent's DNS proxy. It replaces Istio's `istio-iptables` programmer
// (pilot-agent istio-iptables, run by the istio-init container of installs without Istio CNI).
//
// The rules follow Istio's for every flag combination: the iptables plan (plan.go) Istio's
// tools/istio-iptables/pkg/capture/run.go, the native nftables rules (nft.go) Istio's
// tools/istio-nftables/pkg/capture/run.go; PARITY.md says where each comes from and what differs
// on purpose. Their behaviour is checked by traffic tests in network namespaces (netns_test.go).
// The package reads no environment: cmd/pilot-agent parses Istio's flags and variables into a
// Config.
package capture

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mode is how inbound connections reach Envoy.
type Mode string

// Inbound interception modes (Istio's INBOUND_INTERCEPTION_MODE values).
const (
	Redirect Mode = "REDIRECT"
	TProxy   Mode = "TPROXY"
)

// Istio's fixed values.
const (
	// DNSPort is the agent's DNS proxy port (Istio's IstioAgentDNSListenerPort).
	DNSPort = 15053
	// OutboundMark marks Envoy's outbound-to-app packets in TPROXY mode so the inbound chain
	// lets them through (Istio's OutboundMark).
	OutboundMark = "1338"
	// DefaultProxyUID is used when neither -u nor ENVOY_USER's uid is known.
	DefaultProxyUID = "1337"
)

// Config is everything the capture needs, already parsed and validated. Zero values mean "not
// set"; Defaults gives Istio's defaults.
type Config struct {
	ProxyPort          uint16 // -p: Envoy's outbound listener (15001)
	InboundCapturePort uint16 // -z: Envoy's inbound listener (15006)
	InboundTunnelPort  uint16 // -e: HBONE tunnel port, never captured (15008)

	ProxyUIDs []string // -u: traffic of these uids is not captured (Envoy, the agent)
	ProxyGIDs []string // -g: same for gids (defaults to the uids)

	Mode             Mode   // -m
	TProxyMark       string // -t: packet mark for TPROXY (1337)
	TProxyRouteTable int    // -r: routing table for TPROXY (133)

	InboundPorts        Ports // -b: captured inbound ports, or all ("*")
	InboundPortsExclude Ports // -d: ports left alone when InboundPorts is "*"

	OutboundCIDRs        CIDRs // -i: captured destinations, or all ("*")
	OutboundCIDRsExclude CIDRs // -x: destinations never captured
	OutboundPorts        Ports // -q: destination ports always captured
	OutboundPortsExclude Ports // -o: destination ports never captured

	ExcludeInterfaces []string // -c: neither direction captured on these
	VirtInterfaces    []string // -k: inbound on these is treated as outbound (KubeVirt)

	// OwnerGroupsOnly (ISTIO_OUTBOUND_OWNER_GROUPS set to other than "*") captures the
	// outbound traffic of the OwnerGroupsInclude groups only (none listed: nothing captured);
	// otherwise all groups' but OwnerGroupsExclude's (ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE).
	OwnerGroupsOnly    bool
	OwnerGroupsInclude []string
	OwnerGroupsExclude []string

	// LoopbackCIDR (ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR, 127.0.0.1/32) is the IPv4 loopback range
	// treated as "the application's own localhost".
	LoopbackCIDR netip.Prefix

	RedirectDNS   bool         // --redirect-dns / ISTIO_META_DNS_CAPTURE
	CaptureAllDNS bool         // --capture-all-dns: all of port 53, not only the resolvers'
	DNSServers    []netip.Addr // resolv.conf nameservers (when RedirectDNS && !CaptureAllDNS)
	DropInvalid   bool         // --drop-invalid / INVALID_DROP

	// IPv6 programs ip6tables too (Istio: the pod's first address is IPv6, or any is with
	// --dual-stack).
	IPv6 bool

	ProbePort    uint16        // --iptables-probe-port (15002), for --run-validation
	ProbeTimeout time.Duration // --probe-timeout (5s)
}

// Defaults returns Istio's defaults (tools/istio-iptables config.DefaultConfig).
func Defaults() Config {
	return Config{
		ProxyPort: 15001, InboundCapturePort: 15006, InboundTunnelPort: 15008,
		Mode: Redirect, TProxyMark: "1337", TProxyRouteTable: 133,
		LoopbackCIDR: netip.MustParsePrefix("127.0.0.1/32"),
		ProbePort:    15002, ProbeTimeout: 5 * time.Second,
	}
}

// Ports is a list of ports or port ranges ("8000:8080", iptables syntax), or All ("*").
type Ports struct {
	All   bool
	Items []string
}

// Empty reports whether nothing is listed.
func (p Ports) Empty() bool { return !p.All && len(p.Items) == 0 }

// CIDRs is a list of address ranges split by family, or All ("*").
type CIDRs struct {
	All    bool
	V4, V6 []netip.Prefix
}

// Of returns the ranges of one family.
func (c CIDRs) Of(v6 bool) []netip.Prefix {
	if v6 {
		return c.V6
	}
	return c.V4
}

// HasLoopback reports whether a listed range starts in the loopback range (either family):
// Istio then captures the application's loopback traffic too.
func (c CIDRs) HasLoopback() bool {
	for _, p := range append(append([]netip.Prefix(nil), c.V4...), c.V6...) {
		if p.Addr().IsLoopback() {
			return true
		}
	}
	return false
}

// SplitList splits a comma-separated list as Istio does: items are trimmed, empty ones dropped.
func SplitList(s string) []string {
	var out []string
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// ParsePorts parses a port list ("*", "80,443", "8000:8080").
func ParsePorts(s string) (Ports, error) {
	if strings.TrimSpace(s) == "*" {
		return Ports{All: true}, nil
	}
	var p Ports
	for _, it := range SplitList(s) {
		lo, hi, isRange := strings.Cut(it, ":")
		if _, err := parsePort(lo); err != nil {
			return Ports{}, fmt.Errorf("port %q: %w", it, err)
		}
		if isRange {
			a, _ := parsePort(lo)
			b, err := parsePort(hi)
			if err != nil || b < a {
				return Ports{}, fmt.Errorf("port range %q: want low:high with 1 <= low <= high <= 65535", it)
			}
		}
		p.Items = append(p.Items, it)
	}
	return p, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, errors.New("want a number from 1 to 65535")
	}
	return uint16(n), nil
}

// ParsePort parses one port number (1-65535).
func ParsePort(s string) (uint16, error) {
	p, err := parsePort(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return p, nil
}

// ParseCIDRs parses a CIDR list ("*" or "10.0.0.0/8,fd00::/8"). Unlike Istio, which skips a
// malformed entry with a warning, a malformed entry is an error: a typo must not silently
// widen or narrow the capture.
func ParseCIDRs(s string) (CIDRs, error) {
	if strings.TrimSpace(s) == "*" {
		return CIDRs{All: true}, nil
	}
	var c CIDRs
	for _, it := range SplitList(s) {
		p, err := netip.ParsePrefix(it)
		if err != nil {
			return CIDRs{}, fmt.Errorf("CIDR %q: %w", it, err)
		}
		p = p.Masked()
		if p.Addr().Is4() {
			c.V4 = append(c.V4, p)
		} else {
			c.V6 = append(c.V6, p)
		}
	}
	return c, nil
}

var (
	// Compiled on first use, not at every start of the agent (capture is usually off).
	ifaceName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.:@+-]{1,15}$`) })
	ownerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+|[A-Za-z_][A-Za-z0-9_.-]*\$?)$`) })
)

// ParseInterfaces parses an interface list.
func ParseInterfaces(s string) ([]string, error) {
	items := SplitList(s)
	for _, it := range items {
		if !ifaceName().MatchString(it) {
			return nil, fmt.Errorf("interface name %q: want 1-15 characters of letters, digits and _.:@+-", it)
		}
	}
	return items, nil
}

// ParseOwners parses a list of user or group ids (numbers or names).
func ParseOwners(s string) ([]string, error) {
	items := SplitList(s)
	for _, it := range items {
		if !ownerName().MatchString(it) {
			return nil, fmt.Errorf("owner %q: want a numeric id or a user/group name", it)
		}
	}
	return items, nil
}

// ParseMode parses -m: empty means REDIRECT (Istio treats every value but TPROXY as REDIRECT;
// here anything else is refused).
func ParseMode(s string) (Mode, error) {
	switch strings.TrimSpace(s) {
	case "", string(Redirect):
		return Redirect, nil
	case string(TProxy):
		return TProxy, nil
	}
	return "", fmt.Errorf("%q: want REDIRECT or TPROXY", s)
}

// ParseMark parses a packet mark (a number, decimal or 0x hex, fitting 32 bits).
func ParseMark(s string) (string, error) {
	s = strings.TrimSpace(s)
	if _, err := strconv.ParseUint(s, 0, 32); err != nil || s == "" {
		return "", fmt.Errorf("%q: want a 32-bit number", s)
	}
	return s, nil
}

// maxOwnerGroups is Istio's limit on included groups: all of them are matches of one rule.
const maxOwnerGroups = 64

// Validate checks what single-value parsing cannot: combinations.
func (c *Config) Validate() error {
	if c.OutboundCIDRsExclude.All {
		return errors.New(`istio-service-exclude-cidr: "*" is not allowed`)
	}
	if c.OwnerGroupsOnly && len(c.OwnerGroupsExclude) > 0 {
		// Istio ignores the exclusions then; a setting that does nothing is refused here.
		return errors.New(`ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE: applies only when ISTIO_OUTBOUND_OWNER_GROUPS is "*"`)
	}
	if c.OwnerGroupsOnly && len(c.OwnerGroupsInclude) > maxOwnerGroups {
		return fmt.Errorf("ISTIO_OUTBOUND_OWNER_GROUPS: at most %d groups (they make one rule), got %d", maxOwnerGroups, len(c.OwnerGroupsInclude))
	}
	if !c.LoopbackCIDR.IsValid() || !c.LoopbackCIDR.Addr().Is4() || !c.LoopbackCIDR.Addr().IsLoopback() {
		return fmt.Errorf("ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR=%q: want an IPv4 range inside 127.0.0.0/8", c.LoopbackCIDR)
	}
	if c.LoopbackCIDR.Bits() < 8 {
		return fmt.Errorf("ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR=%q: the range must be inside 127.0.0.0/8", c.LoopbackCIDR)
	}
	if len(c.ProxyUIDs) == 0 {
		return errors.New("proxy-uid: empty")
	}
	return nil
}

// dnsActive is Istio's rule: DNS is redirected when asked and there is something to capture
// (all of port 53, or at least one resolver).
func (c *Config) dnsActive() bool {
	return c.RedirectDNS && (c.CaptureAllDNS || len(c.DNSServers) > 0)
}
