package capture

import (
	"net/netip"
	"strconv"
)

// Chains created by the capture (Istio's names: tools, dashboards and istio-cni's repair look
// for them).
const (
	ChainInbound    = "ISTIO_INBOUND"
	ChainRedirect   = "ISTIO_REDIRECT"
	ChainInRedirect = "ISTIO_IN_REDIRECT"
	ChainOutput     = "ISTIO_OUTPUT"
	ChainOutputDNS  = "ISTIO_OUTPUT_DNS"
	ChainDivert     = "ISTIO_DIVERT"
	ChainTProxy     = "ISTIO_TPROXY"
	ChainDrop       = "ISTIO_DROP"
)

// Rule is one netfilter rule of one address family.
type Rule struct {
	Table string
	Chain string
	// Pos is the 1-based position for an insert; 0 appends.
	Pos  int
	Args []string // match and target, as iptables takes them
}

// Plan is the rule set of both families, in the order the rules are applied.
type Plan struct {
	V4, V6 []Rule
}

// Of returns one family's rules.
func (p *Plan) Of(v6 bool) []Rule {
	if v6 {
		return p.V6
	}
	return p.V4
}

// planner accumulates rules; every rule is added to IPv4 and, when enabled, IPv6.
type planner struct {
	cfg  *Config
	plan Plan
}

func (p *planner) add(v6 bool, table, chain string, pos int, args ...string) {
	r := Rule{Table: table, Chain: chain, Pos: pos, Args: args}
	if v6 {
		if p.cfg.IPv6 {
			p.plan.V6 = append(p.plan.V6, r)
		}
		return
	}
	p.plan.V4 = append(p.plan.V4, r)
}

// both appends a rule to both families; fam appends one whose arguments depend on the family.
func (p *planner) both(table, chain string, args ...string) {
	p.add(false, table, chain, 0, args...)
	p.add(true, table, chain, 0, args...)
}

func (p *planner) fam(table, chain string, args func(v6 bool) []string) {
	p.add(false, table, chain, 0, args(false)...)
	p.add(true, table, chain, 0, args(true)...)
}

func (p *planner) insert(table, chain string, pos int, args ...string) {
	p.add(false, table, chain, pos, args...)
	p.add(true, table, chain, pos, args...)
}

// loopback is "the application's own localhost" of a family.
func (p *planner) loopback(v6 bool) string {
	if v6 {
		return "::1/128"
	}
	return p.cfg.LoopbackCIDR.String()
}

// passthroughSource is the source address Envoy binds for inbound passthrough (127.0.0.6, ::6).
func passthroughSource(v6 bool) string {
	if v6 {
		return "::6/128"
	}
	return "127.0.0.6/32"
}

func hostPrefix(a netip.Addr) string {
	return netip.PrefixFrom(a, a.BitLen()).String()
}

func port(p uint16) string { return strconv.Itoa(int(p)) }

// Build returns the rules Istio programs for cfg. The order matters: exclusions come before the
// redirects they guard, and inserts refer to positions in chains filled earlier.
func Build(cfg *Config) *Plan {
	p := &planner{cfg: cfg}
	tproxy := cfg.Mode == TProxy
	dns := cfg.dnsActive()

	// Interfaces that are never captured, then virtual interfaces whose own traffic is not
	// inbound (first in PREROUTING).
	for _, ifc := range cfg.ExcludeInterfaces {
		p.both("nat", "PREROUTING", "-i", ifc, "-j", "RETURN")
		p.both("nat", "OUTPUT", "-o", ifc, "-j", "RETURN")
	}
	if tproxy {
		for _, ifc := range cfg.ExcludeInterfaces {
			p.both("mangle", "PREROUTING", "-i", ifc, "-j", "RETURN")
			p.both("mangle", "OUTPUT", "-o", ifc, "-j", "RETURN")
		}
	}
	for _, ifc := range cfg.VirtInterfaces {
		p.insert("nat", "PREROUTING", 1, "-i", ifc, "-j", "RETURN")
	}

	// Out-of-window packets are dropped rather than answered with a reset.
	if cfg.DropInvalid {
		p.both("mangle", "PREROUTING", "-m", "conntrack", "--ctstate", "INVALID", "-j", ChainDrop)
		p.both("mangle", ChainDrop, "-j", "DROP")
	}

	// The tunnel port is reached directly; the two redirect chains.
	p.both("nat", ChainInbound, "-p", "tcp", "--dport", port(cfg.InboundTunnelPort), "-j", "RETURN")
	p.both("nat", ChainRedirect, "-p", "tcp", "-j", "REDIRECT", "--to-ports", port(cfg.ProxyPort))
	p.both("nat", ChainInRedirect, "-p", "tcp", "-j", "REDIRECT", "--to-ports", port(cfg.InboundCapturePort))

	p.inbound()

	// Outbound: everything the host sends goes through ISTIO_OUTPUT.
	p.both("nat", "OUTPUT", "-j", ChainOutput)
	for _, pt := range cfg.OutboundPortsExclude.Items {
		p.both("nat", ChainOutput, "-p", "tcp", "--dport", pt, "-j", "RETURN")
		p.both("nat", ChainOutput, "-p", "udp", "--dport", pt, "-j", "RETURN")
	}
	// Envoy's inbound passthrough connects from 127.0.0.6 (::6): never captured.
	p.fam("nat", ChainOutput, func(v6 bool) []string {
		return []string{"-o", "lo", "-s", passthroughSource(v6), "-j", "RETURN"}
	})
	p.owners("--uid-owner", cfg.ProxyUIDs, dns, dns)
	p.owners("--gid-owner", cfg.ProxyGIDs, false, dns) // Istio: no port-53 exception on the gid redirect
	p.ownerGroups()
	if dns {
		p.dns()
	}
	// Explicit localhost (Envoy-aware apps, container to container) is left alone.
	p.fam("nat", ChainOutput, func(v6 bool) []string { return []string{"-d", p.loopback(v6), "-j", "RETURN"} })
	for _, v6 := range []bool{false, true} {
		for _, c := range cfg.OutboundCIDRsExclude.Of(v6) {
			p.add(v6, "nat", ChainOutput, 0, "-d", c.String(), "-j", "RETURN")
		}
	}
	for _, pt := range cfg.OutboundPorts.Items {
		p.both("nat", ChainOutput, "-p", "tcp", "--dport", pt, "-j", ChainRedirect)
	}
	for _, v6 := range []bool{false, true} {
		p.outboundInclude(v6)
	}
	if tproxy {
		p.tproxyMarks()
	}
	return &p.plan
}

// inbound captures the listed inbound ports (or all but the excluded ones).
func (p *planner) inbound() {
	cfg := p.cfg
	if cfg.InboundPorts.Empty() {
		return
	}
	table := "nat"
	if cfg.Mode == TProxy {
		table = "mangle"
		// Marked packets are routed to the local table (ConfigureRoutes) and so to Envoy.
		p.both("mangle", ChainDivert, "-j", "MARK", "--set-mark", cfg.TProxyMark)
		p.both("mangle", ChainDivert, "-j", "ACCEPT")
		p.fam("mangle", ChainTProxy, func(v6 bool) []string {
			return []string{"!", "-d", p.loopback(v6), "-p", "tcp", "-j", "TPROXY",
				"--tproxy-mark", cfg.TProxyMark + "/0xffffffff", "--on-port", port(cfg.InboundCapturePort)}
		})
	}
	p.both(table, "PREROUTING", "-p", "tcp", "-j", ChainInbound)
	established := []string{"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", ChainDivert}
	if cfg.InboundPorts.All {
		for _, pt := range cfg.InboundPortsExclude.Items {
			p.both(table, ChainInbound, "-p", "tcp", "--dport", pt, "-j", "RETURN")
		}
		if cfg.Mode == TProxy {
			p.both("mangle", ChainInbound, append([]string{"-p", "tcp"}, established...)...)
			p.both("mangle", ChainInbound, "-p", "tcp", "-j", ChainTProxy)
		} else {
			p.both("nat", ChainInbound, "-p", "tcp", "-j", ChainInRedirect)
		}
		return
	}
	for _, pt := range cfg.InboundPorts.Items {
		if cfg.Mode == TProxy {
			p.both("mangle", ChainInbound, append([]string{"-p", "tcp", "--dport", pt}, established...)...)
			p.both("mangle", ChainInbound, "-p", "tcp", "--dport", pt, "-j", ChainTProxy)
		} else {
			p.both("nat", ChainInbound, "-p", "tcp", "--dport", pt, "-j", ChainInRedirect)
		}
	}
}

// owners exempts the proxy's own uids (or gids), except its calls back to the pod's own
// address, which go to Envoy's inbound side (app -> Envoy -> Envoy -> app through a VIP).
func (p *planner) owners(match string, ids []string, dnsRedirect, dns bool) {
	cfg := p.cfg
	tunnel := port(cfg.InboundTunnelPort)
	for _, id := range ids {
		p.fam("nat", ChainOutput, func(v6 bool) []string {
			a := []string{"-o", "lo", "!", "-d", p.loopback(v6), "-p", "tcp"}
			if dnsRedirect {
				// DNS from the agent to a resolver on the pod's address is not looped through Envoy.
				a = append(a, "-m", "multiport", "!", "--dports", "53,"+tunnel)
			} else {
				a = append(a, "!", "--dport", tunnel)
			}
			return append(a, "-m", "owner", match, id, "-j", ChainInRedirect)
		})
		// An app talking to itself over lo is left alone, unless loopback is explicitly captured;
		// with DNS capture, TCP DNS to a local resolver is still captured.
		if !cfg.OutboundCIDRs.HasLoopback() {
			if dns {
				p.both("nat", ChainOutput, "-o", "lo", "-p", "tcp", "!", "--dport", "53", "-m", "owner", "!", match, id, "-j", "RETURN")
			} else {
				p.both("nat", ChainOutput, "-o", "lo", "-m", "owner", "!", match, id, "-j", "RETURN")
			}
		}
		// Everything else the proxy sends (any protocol) is never captured.
		p.both("nat", ChainOutput, "-m", "owner", match, id, "-j", "RETURN")
	}
}

// ownerGroups limits outbound capture to some groups (ISTIO_OUTBOUND_OWNER_GROUPS[_EXCLUDE]).
func (p *planner) ownerGroups() {
	cfg := p.cfg
	if cfg.OwnerGroupsOnly {
		var a []string
		for _, g := range cfg.OwnerGroupsInclude {
			a = append(a, "-m", "owner", "!", "--gid-owner", g)
		}
		p.both("nat", ChainOutput, append(a, "-j", "RETURN")...)
		return
	}
	for _, g := range cfg.OwnerGroupsExclude {
		p.both("nat", ChainOutput, "-m", "owner", "--gid-owner", g, "-j", "RETURN")
	}
}

// dns sends DNS (TCP and UDP port 53) to the agent: to the resolvers of resolv.conf, or all of
// it with CaptureAllDNS, and splits UDP DNS into two conntrack zones (agent <-> resolver, app <->
// agent) so the two legs of one query never collide.
func (p *planner) dns() {
	cfg := p.cfg
	servers := func(v6 bool) []netip.Addr {
		var out []netip.Addr
		for _, s := range cfg.DNSServers {
			if s.Is6() == v6 {
				out = append(out, s)
			}
		}
		return out
	}
	to := port(DNSPort)
	p.both("raw", "OUTPUT", "-j", ChainOutputDNS)
	for _, v6 := range []bool{false, true} {
		if cfg.CaptureAllDNS || len(servers(v6)) > 0 {
			p.add(v6, "nat", ChainOutput, 0, "-j", ChainOutputDNS)
		}
	}
	for _, proto := range []string{"tcp", "udp"} {
		if cfg.CaptureAllDNS {
			p.both("nat", ChainOutputDNS, "-p", proto, "--dport", "53", "-j", "REDIRECT", "--to-ports", to)
			continue
		}
		for _, v6 := range []bool{false, true} {
			for _, s := range servers(v6) {
				p.add(v6, "nat", ChainOutputDNS, 0, "-p", proto, "--dport", "53", "-d", hostPrefix(s), "-j", "REDIRECT", "--to-ports", to)
			}
		}
	}
	for _, ids := range []struct {
		match string
		ids   []string
	}{{"--uid-owner", cfg.ProxyUIDs}, {"--gid-owner", cfg.ProxyGIDs}} {
		for _, id := range ids.ids {
			p.both("raw", ChainOutputDNS, "-p", "udp", "--dport", "53", "-m", "owner", ids.match, id, "-j", "CT", "--zone", "1")
			p.both("raw", ChainOutputDNS, "-p", "udp", "--sport", to, "-m", "owner", ids.match, id, "-j", "CT", "--zone", "2")
		}
	}
	if cfg.CaptureAllDNS {
		p.both("raw", "PREROUTING", "-j", ChainInbound)
		p.both("raw", ChainOutputDNS, "-p", "udp", "--dport", "53", "-j", "CT", "--zone", "2")
		p.both("raw", ChainInbound, "-p", "udp", "--sport", "53", "-j", "CT", "--zone", "1")
		return
	}
	for _, v6 := range []bool{false, true} {
		if len(servers(v6)) > 0 {
			p.add(v6, "raw", "PREROUTING", 0, "-j", ChainInbound)
		}
		for _, s := range servers(v6) {
			p.add(v6, "raw", ChainOutputDNS, 0, "-p", "udp", "--dport", "53", "-d", hostPrefix(s), "-j", "CT", "--zone", "2")
			p.add(v6, "raw", ChainInbound, 0, "-p", "udp", "--sport", "53", "-s", hostPrefix(s), "-j", "CT", "--zone", "1")
		}
	}
}

// outboundInclude redirects the included destinations (or everything left) to Envoy; virtual
// interfaces' inbound traffic to them too.
func (p *planner) outboundInclude(v6 bool) {
	cfg := p.cfg
	if cfg.OutboundCIDRs.All {
		p.add(v6, "nat", ChainOutput, 0, "-j", ChainRedirect)
		for _, ifc := range cfg.VirtInterfaces {
			p.add(v6, "nat", "PREROUTING", 1, "-i", ifc, "-j", ChainRedirect)
		}
		return
	}
	for _, c := range cfg.OutboundCIDRs.Of(v6) {
		for _, ifc := range cfg.VirtInterfaces {
			p.add(v6, "nat", "PREROUTING", 1, "-i", ifc, "-d", c.String(), "-j", ChainRedirect)
		}
		p.add(v6, "nat", ChainOutput, 0, "-d", c.String(), "-j", ChainRedirect)
	}
}

// tproxyMarks keeps TPROXY's marks straight: Envoy's connections back to the app are marked so
// the inbound chain does not capture them again, and connection marks are restored on replies.
func (p *planner) tproxyMarks() {
	cfg := p.cfg
	mark := cfg.TProxyMark
	p.both("mangle", "PREROUTING", "-p", "tcp", "-m", "mark", "--mark", mark, "-j", "CONNMARK", "--save-mark")
	p.both("mangle", "OUTPUT", "-p", "tcp", "-o", "lo", "-m", "mark", "--mark", mark, "-j", "RETURN")
	for _, o := range []struct {
		match string
		ids   []string
	}{{"--uid-owner", cfg.ProxyUIDs}, {"--gid-owner", cfg.ProxyGIDs}} {
		for _, id := range o.ids {
			p.fam("mangle", "OUTPUT", func(v6 bool) []string {
				return []string{"!", "-d", p.loopback(v6), "-p", "tcp", "-o", "lo", "-m", "owner", o.match, id,
					"-j", "MARK", "--set-mark", OutboundMark}
			})
		}
	}
	p.both("mangle", "OUTPUT", "-p", "tcp", "-m", "connmark", "--mark", mark, "-j", "CONNMARK", "--restore-mark")
	p.insert("mangle", ChainInbound, 1, "-p", "tcp", "-m", "mark", "--mark", mark, "-j", "RETURN")
	p.add(false, "mangle", ChainInbound, 2, "-p", "tcp", "-s", passthroughSource(false), "-i", "lo", "-j", "RETURN")
	p.add(true, "mangle", ChainInbound, 2, "-p", "tcp", "-s", passthroughSource(true), "-i", "lo", "-j", "RETURN")
	p.insert("mangle", ChainInbound, 3, "-p", "tcp", "-i", "lo", "-m", "mark", "!", "--mark", OutboundMark, "-j", "RETURN")
}
