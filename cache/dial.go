package cache

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// knownMetadata are cloud metadata addresses outside the link-local range (Istio:
// pkg/security IsKnownCloudMetadataAddress: Alibaba Cloud's and AWS's IPv6 IMDS).
var knownMetadata = []netip.Prefix{
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("fd00:ec2::/32"),
}

// nat64 is the well-known NAT64 prefix: an IPv4 address embedded in it reaches that address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// guard refuses connections to addresses a module fetch must never reach. It resolves names
// itself and dials the address it checked, so a name cannot resolve differently for the check
// and for the connection (DNS rebinding).
type guard struct {
	blocked  []netip.Prefix
	resolver *net.Resolver
	dialer   net.Dialer
}

func newGuard(blocked []netip.Prefix) *guard {
	// Timeout and keep-alive as http.DefaultTransport's and go-containerregistry's dialers.
	return &guard{blocked: blocked, resolver: net.DefaultResolver,
		dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
}

// check returns why ip is refused, or nil. IPv4-mapped and NAT64 forms are checked as the IPv4
// address they reach.
func (g *guard) check(ip netip.Addr) error {
	ip = ip.Unmap()
	if ip.Is6() && nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		return fmt.Errorf("connection blocked: resolved IP %s is link-local", ip)
	}
	for _, p := range knownMetadata {
		if p.Contains(ip) {
			return fmt.Errorf("connection blocked: resolved IP %s is a known cloud metadata address", ip)
		}
	}
	for _, p := range g.blocked {
		if p.Contains(ip) {
			return fmt.Errorf("connection blocked: resolved IP %s is in blocked CIDR range %s", ip, p)
		}
	}
	return nil
}

// DialContext resolves addr, refuses it if any of its addresses is blocked, and dials the
// checked addresses in turn.
func (g *guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		if ips, err = g.resolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, err
		}
	}
	for _, ip := range ips {
		if err := g.check(ip); err != nil {
			return nil, fmt.Errorf("wasm fetch of %s: %w", host, err)
		}
	}
	var last error
	for _, ip := range ips {
		c, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	if last == nil {
		last = fmt.Errorf("no address for %s", host)
	}
	return nil, last
}
