package capture

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Native nftables (Istio's NATIVE_NFTABLES, tools/istio-nftables). The rules are Istio's own
// nftables rules, built here from the Config in the order Istio's NftablesConfigurator.Run
// builds them (tools/istio-nftables/pkg/capture/run.go), not a translation of the iptables
// plan: Istio writes them once into inet tables, so a rule that names no address applies to
// IPv4 and IPv6 alike (IPv6 is captured even when IPv6 is not enabled), and only the rules that
// name an IPv6 address (ip6 daddr ::1/128, ip6 saddr ::6/128, IPv6 CIDRs and resolvers) depend
// on IPv6 being enabled (Istio's AppendV6RuleIfSupported/InsertV6RuleIfSupported, builder
// nftables_builder_impl.go). The nft CLI applies them in one transaction.

// Istio's table and chain names (tools/istio-nftables/pkg/constants/constants.go).
const (
	nftNat    = "istio-proxy-nat"
	nftMangle = "istio-proxy-mangle"
	nftRaw    = "istio-proxy-raw"

	nftPrerouting  = "prerouting"
	nftOutput      = "output"
	nftInbound     = "istio-inbound"
	nftOutputC     = "istio-output"
	nftOutputDNS   = "istio-output-dns"
	nftRedirect    = "istio-redirect"
	nftInRedirect  = "istio-in-redirect"
	nftDivert      = "istio-divert"
	nftTProxyChain = "istio-tproxy"
	nftDrop        = "istio-drop"
)

// nftChainDecl is one chain Istio may create in a table, in Istio's order; base chains carry
// their type, hook and priority (run.go addIstio{Nat,Mangle,Raw}TableRules).
type nftChainDecl struct {
	name, base string
}

// nftTableOrder is the tables in the order Istio's executeCommands adds them to the
// transaction, each with its chains in the order Istio declares them.
var nftTableOrder = []struct {
	name   string
	chains []nftChainDecl
}{
	{nftNat, []nftChainDecl{
		{nftPrerouting, "type nat hook prerouting priority dstnat; policy accept;"},
		// Istio asks for knftables.DNATPriority ("dstnat", -100) here too; nft 1.0.6 refuses the
		// name "dstnat" outside prerouting, so the number is written: the same chain in the kernel.
		{nftOutput, "type nat hook output priority -100; policy accept;"},
		{nftInbound, ""}, {nftRedirect, ""}, {nftInRedirect, ""}, {nftOutputC, ""}, {nftOutputDNS, ""},
	}},
	{nftMangle, []nftChainDecl{
		{nftPrerouting, "type filter hook prerouting priority mangle; policy accept;"},
		{nftOutput, "type route hook output priority mangle; policy accept;"},
		{nftDivert, ""}, {nftTProxyChain, ""}, {nftInbound, ""}, {nftDrop, ""},
	}},
	{nftRaw, []nftChainDecl{
		{nftPrerouting, "type filter hook prerouting priority raw; policy accept;"},
		{nftOutput, "type filter hook output priority raw; policy accept;"},
		{nftInbound, ""}, {nftOutputDNS, ""},
	}},
}

// NftTables returns the names of the tables the capture owns (Istio's IstioTableNames order).
func NftTables(*Config) []string {
	return []string{nftNat, nftMangle, nftRaw}
}

// nftOp is one rule as Istio's builder records it: appended, or inserted at a 0-based index.
type nftOp struct {
	chain string
	index int // -1: append
	expr  string
}

// nftBuilder collects the rules of each table in the order they are built.
type nftBuilder struct {
	cfg *Config
	ops map[string][]nftOp
}

func (b *nftBuilder) op(table, chain string, index int, parts ...string) {
	b.ops[table] = append(b.ops[table], nftOp{chain, index, strings.Join(parts, " ")})
}

// add appends a rule for both families (unless an address in it says otherwise).
func (b *nftBuilder) add(table, chain string, parts ...string) { b.op(table, chain, -1, parts...) }

// add6 appends a rule only when IPv6 is enabled (it names an IPv6 address).
func (b *nftBuilder) add6(table, chain string, parts ...string) {
	if b.cfg.IPv6 {
		b.op(table, chain, -1, parts...)
	}
}

func (b *nftBuilder) insert(table, chain string, index int, parts ...string) {
	b.op(table, chain, index, parts...)
}

func (b *nftBuilder) insert6(table, chain string, index int, parts ...string) {
	if b.cfg.IPv6 {
		b.op(table, chain, index, parts...)
	}
}

// nftPort is a port or range as nft writes it ("8000:8080" is iptables' spelling).
func nftPort(p string) string { return strings.ReplaceAll(p, ":", "-") }

var nftPlainName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_]*|[0-9]+)$`) })

// nftName writes an interface, user or group name as Istio does (bare), quoting one nft would
// not read bare (a "-", "." or "$" in it).
func nftName(n string) string {
	if nftPlainName().MatchString(n) {
		return n
	}
	return fmt.Sprintf("%q", n)
}

// nftBuild builds Istio's rules for cfg, in the order of NftablesConfigurator.Run.
func nftBuild(cfg *Config) *nftBuilder {
	b := &nftBuilder{cfg: cfg, ops: map[string][]nftOp{}}
	tproxy := cfg.Mode == TProxy
	dns := cfg.dnsActive() // Run: REDIRECT_DNS without CAPTURE_ALL_DNS or servers is dropped
	loop4 := cfg.LoopbackCIDR.String()
	tunnel := port(cfg.InboundTunnelPort)

	// shortCircuitExcludeInterfaces, then shortCircuitKubeInternalInterface.
	for _, ifc := range cfg.ExcludeInterfaces {
		b.add(nftNat, nftPrerouting, "iifname", nftName(ifc), "counter", "return")
		b.add(nftNat, nftOutput, "oifname", nftName(ifc), "counter", "return")
	}
	if tproxy {
		for _, ifc := range cfg.ExcludeInterfaces {
			b.add(nftMangle, nftPrerouting, "iifname", nftName(ifc), "counter", "return")
			b.add(nftMangle, nftOutput, "oifname", nftName(ifc), "counter", "return")
		}
	}
	for _, ifc := range cfg.VirtInterfaces {
		b.insert(nftNat, nftPrerouting, 0, "iifname", nftName(ifc), "counter", "return")
	}

	if cfg.DropInvalid {
		b.add(nftMangle, nftPrerouting, "meta l4proto tcp", "ct state", "invalid", "counter", "jump", nftDrop)
		b.add(nftMangle, nftDrop, "counter", "drop")
	}

	b.add(nftNat, nftInbound, "meta l4proto tcp", "tcp dport", tunnel, "counter", "return")
	b.add(nftNat, nftRedirect, "meta l4proto tcp", "counter", "redirect to", ":"+port(cfg.ProxyPort))
	b.add(nftNat, nftInRedirect, "meta l4proto tcp", "counter", "redirect to", ":"+port(cfg.InboundCapturePort))

	b.inbound()

	b.add(nftNat, nftOutput, "counter", "jump", nftOutputC)
	for _, p := range cfg.OutboundPortsExclude.Items {
		b.add(nftNat, nftOutputC, "tcp dport", nftPort(p), "counter", "return")
		b.add(nftNat, nftOutputC, "udp dport", nftPort(p), "counter", "return")
	}
	b.add(nftNat, nftOutputC, "oifname", "lo", "ip saddr", passthroughSource(false), "counter", "return")
	b.add6(nftNat, nftOutputC, "oifname", "lo", "ip6 saddr", passthroughSource(true), "counter", "return")

	b.owners("skuid", cfg.ProxyUIDs, dns, dns)
	b.owners("skgid", cfg.ProxyGIDs, false, dns) // Istio: no port-53 exception on the gid redirect

	// handleCaptureByOwnerGroup.
	if cfg.OwnerGroupsOnly {
		var parts []string
		for _, g := range cfg.OwnerGroupsInclude {
			parts = append(parts, "skgid", "!=", nftName(g))
		}
		b.add(nftNat, nftOutputC, append(parts, "counter", "return")...)
	} else {
		for _, g := range cfg.OwnerGroupsExclude {
			b.add(nftNat, nftOutputC, "skgid", nftName(g), "counter", "return")
		}
	}

	if dns {
		b.dns()
	}

	b.add(nftNat, nftOutputC, "ip daddr", loop4, "counter", "return")
	b.add6(nftNat, nftOutputC, "ip6 daddr", "::1/128", "counter", "return")
	for _, c := range cfg.OutboundCIDRsExclude.V4 {
		b.add(nftNat, nftOutputC, "ip daddr", c.String(), "counter", "return")
	}
	for _, c := range cfg.OutboundCIDRsExclude.V6 {
		b.add6(nftNat, nftOutputC, "ip6 daddr", c.String(), "counter", "return")
	}

	// handleOutboundPortsInclude, handleOutboundIncludeRules.
	for _, p := range cfg.OutboundPorts.Items {
		b.add(nftNat, nftOutputC, "tcp dport", nftPort(p), "counter", "jump", nftRedirect)
	}
	if cfg.OutboundCIDRs.All {
		b.add(nftNat, nftOutputC, "counter", "jump", nftRedirect)
		for _, ifc := range cfg.VirtInterfaces {
			b.insert(nftNat, nftPrerouting, 0, "iifname", nftName(ifc), "counter", "jump", nftRedirect)
		}
	} else {
		for _, c := range cfg.OutboundCIDRs.V4 {
			for _, ifc := range cfg.VirtInterfaces {
				b.insert(nftNat, nftPrerouting, 0, "iifname", nftName(ifc), "ip daddr", c.String(), "counter", "jump", nftRedirect)
			}
			b.add(nftNat, nftOutputC, "ip daddr", c.String(), "counter", "jump", nftRedirect)
		}
		for _, c := range cfg.OutboundCIDRs.V6 {
			for _, ifc := range cfg.VirtInterfaces {
				b.insert6(nftNat, nftPrerouting, 0, "iifname", nftName(ifc), "ip6 daddr", c.String(), "counter", "jump", nftRedirect)
			}
			b.add6(nftNat, nftOutputC, "ip6 daddr", c.String(), "counter", "jump", nftRedirect)
		}
	}

	if tproxy {
		b.tproxyMarks()
	}
	return b
}

// inbound is Istio's handleInboundPortsInclude / handleInboundTProxyMode.
func (b *nftBuilder) inbound() {
	cfg := b.cfg
	if cfg.InboundPorts.Empty() {
		return
	}
	if cfg.Mode == TProxy {
		mark, capturePort := cfg.TProxyMark, ":"+port(cfg.InboundCapturePort)
		b.add(nftMangle, nftDivert, "counter", "meta mark set", mark)
		b.add(nftMangle, nftDivert, "counter", "accept")
		b.add(nftMangle, nftTProxyChain, "meta l4proto tcp", "ip daddr", "!=", cfg.LoopbackCIDR.String(),
			"tproxy ip to", capturePort, "meta mark set", mark, "counter", "accept")
		b.add6(nftMangle, nftTProxyChain, "meta l4proto tcp", "ip6 daddr", "!=", "::1/128",
			"tproxy ip6 to", capturePort, "meta mark set", mark, "counter", "accept")
		b.add(nftMangle, nftPrerouting, "meta l4proto tcp", "counter", "jump", nftInbound)
		if cfg.InboundPorts.All {
			for _, p := range cfg.InboundPortsExclude.Items {
				b.add(nftMangle, nftInbound, "meta l4proto tcp", "tcp dport", nftPort(p), "counter", "return")
			}
			b.add(nftMangle, nftInbound, "meta l4proto tcp", "ct state", "related,established", "counter", "jump", nftDivert)
			b.add(nftMangle, nftInbound, "meta l4proto tcp", "counter", "jump", nftTProxyChain)
			return
		}
		for _, p := range cfg.InboundPorts.Items {
			b.add(nftMangle, nftInbound, "meta l4proto tcp", "ct state", "related,established", "tcp dport", nftPort(p), "counter", "jump", nftDivert)
			b.add(nftMangle, nftInbound, "meta l4proto tcp", "tcp dport", nftPort(p), "counter", "jump", nftTProxyChain)
		}
		return
	}
	b.add(nftNat, nftPrerouting, "meta l4proto tcp", "counter", "jump", nftInbound)
	if cfg.InboundPorts.All {
		for _, p := range cfg.InboundPortsExclude.Items {
			b.add(nftNat, nftInbound, "meta l4proto tcp", "tcp dport", nftPort(p), "counter", "return")
		}
		b.add(nftNat, nftInbound, "meta l4proto tcp", "counter", "jump", nftInRedirect)
		return
	}
	for _, p := range cfg.InboundPorts.Items {
		b.add(nftNat, nftInbound, "meta l4proto tcp", "tcp dport", nftPort(p), "counter", "jump", nftInRedirect)
	}
}

// owners is Run's loop over the proxy uids (skuid) or gids (skgid): the proxy's calls back to
// the pod's own address go to Envoy's inbound side, an app's own lo traffic is left alone
// (unless loopback is captured), and everything else the proxy sends is never captured.
func (b *nftBuilder) owners(key string, ids []string, dnsPorts, dns bool) {
	cfg := b.cfg
	tunnel := port(cfg.InboundTunnelPort)
	skip := tunnel
	if dnsPorts {
		skip = "{ 53, " + tunnel + " }"
	}
	for _, id := range ids {
		id = nftName(id)
		b.add(nftNat, nftOutputC, "oifname", "lo", "meta l4proto tcp", "ip daddr", "!=", cfg.LoopbackCIDR.String(),
			"tcp dport", "!=", skip, key, id, "counter", "jump", nftInRedirect)
		b.add6(nftNat, nftOutputC, "oifname", "lo", "meta l4proto tcp", "ip6 daddr", "!=", "::1/128",
			"tcp dport", "!=", skip, key, id, "counter", "jump", nftInRedirect)
		if !cfg.OutboundCIDRs.HasLoopback() {
			if dns {
				b.add(nftNat, nftOutputC, "oifname", "lo", "meta l4proto tcp", "tcp dport", "!=", "53", key, "!=", id, "counter", "return")
			} else {
				b.add(nftNat, nftOutputC, "oifname", "lo", key, "!=", id, "counter", "return")
			}
		}
		b.add(nftNat, nftOutputC, key, id, "counter", "return")
	}
}

// dns is Istio's SetupDNSRedir and addDNSConntrackZones.
func (b *nftBuilder) dns() {
	cfg := b.cfg
	var v4, v6 []netip.Addr
	for _, s := range cfg.DNSServers {
		if s.Is6() {
			v6 = append(v6, s)
		} else {
			v4 = append(v4, s)
		}
	}
	to := ":" + port(DNSPort)
	b.add(nftRaw, nftOutput, "counter", "jump", nftOutputDNS)
	b.add(nftNat, nftOutputC, "counter", "jump", nftOutputDNS) // dns() runs only when there is something to capture
	if cfg.CaptureAllDNS {
		b.add(nftNat, nftOutputDNS, "meta l4proto tcp", "tcp dport", "53", "counter", "redirect", "to", to)
		b.add(nftNat, nftOutputDNS, "udp dport", "53", "counter", "redirect", "to", to)
	} else {
		for _, proto := range []string{"tcp", "udp"} {
			for _, s := range v4 {
				b.add(nftNat, nftOutputDNS, "ip daddr", hostPrefix(s), proto+" dport", "53", "counter", "redirect", "to", to)
			}
			for _, s := range v6 {
				b.add6(nftNat, nftOutputDNS, "ip6 daddr", hostPrefix(s), proto+" dport", "53", "counter", "redirect", "to", to)
			}
		}
	}
	for _, o := range []struct {
		key string
		ids []string
	}{{"skuid", cfg.ProxyUIDs}, {"skgid", cfg.ProxyGIDs}} {
		for _, id := range o.ids {
			id = nftName(id)
			b.add(nftRaw, nftOutputDNS, "udp dport", "53", "meta", o.key, id, "counter", "ct", "zone", "set", "1")
			b.add(nftRaw, nftOutputDNS, "udp sport", port(DNSPort), "meta", o.key, id, "counter", "ct", "zone", "set", "2")
		}
	}
	if cfg.CaptureAllDNS {
		b.add(nftRaw, nftPrerouting, "counter", "jump", nftInbound)
		b.add(nftRaw, nftOutputDNS, "udp dport", "53", "counter", "ct", "zone", "set", "2")
		b.add(nftRaw, nftInbound, "udp sport", "53", "counter", "ct", "zone", "set", "1")
		return
	}
	b.add(nftRaw, nftPrerouting, "counter", "jump", nftInbound)
	for _, s := range v4 {
		b.add(nftRaw, nftOutputDNS, "udp dport", "53", "ip daddr", hostPrefix(s), "counter", "ct", "zone", "set", "2")
		b.add(nftRaw, nftInbound, "udp sport", "53", "ip saddr", hostPrefix(s), "counter", "ct", "zone", "set", "1")
	}
	for _, s := range v6 {
		b.add6(nftRaw, nftOutputDNS, "udp dport", "53", "ip6 daddr", hostPrefix(s), "counter", "ct", "zone", "set", "2")
		b.add6(nftRaw, nftInbound, "udp sport", "53", "ip6 saddr", hostPrefix(s), "counter", "ct", "zone", "set", "1")
	}
}

// tproxyMarks is the end of Run in TPROXY mode: connection marks saved and restored, Envoy's
// connections back to the app marked 1338, and the inbound chain's guards inserted first.
func (b *nftBuilder) tproxyMarks() {
	cfg := b.cfg
	mark, loop4 := cfg.TProxyMark, cfg.LoopbackCIDR.String()
	b.add(nftMangle, nftPrerouting, "meta l4proto tcp", "mark", mark, "counter", "ct mark set mark")
	b.add(nftMangle, nftOutput, "oifname", "lo", "meta l4proto tcp", "mark", mark, "counter", "return")
	for _, o := range []struct {
		key string
		ids []string
	}{{"skuid", cfg.ProxyUIDs}, {"skgid", cfg.ProxyGIDs}} {
		for _, id := range o.ids {
			id = nftName(id)
			b.add(nftMangle, nftOutput, "oifname", "lo", "meta l4proto tcp", "ip daddr", "!=", loop4, o.key, id, "counter", "meta mark set", OutboundMark)
			b.add6(nftMangle, nftOutput, "oifname", "lo", "meta l4proto tcp", "ip6 daddr", "!=", "::1/128", o.key, id, "counter", "meta mark set", OutboundMark)
		}
	}
	b.add(nftMangle, nftOutput, "meta l4proto tcp", "ct", "mark", mark, "counter", "meta mark set", "ct", "mark")
	b.insert(nftMangle, nftInbound, 0, "meta l4proto tcp", "mark", mark, "counter", "return")
	b.insert(nftMangle, nftInbound, 1, "iifname", "lo", "meta l4proto tcp", "ip saddr", passthroughSource(false), "counter", "return")
	b.insert6(nftMangle, nftInbound, 1, "iifname", "lo", "meta l4proto tcp", "ip6 saddr", passthroughSource(true), "counter", "return")
	b.insert(nftMangle, nftInbound, 2, "iifname", "lo", "meta l4proto tcp", "mark", "!=", OutboundMark, "counter", "return")
}

// nftChain is one chain's final rule list.
type nftChain struct {
	table, chain string
	rules        []string
}

// nftLayout resolves the builder's appends and inserts into each chain's final rules, as
// Istio's addIstioTableRules places them: an insert into an empty chain, or at an index past
// its end, appends.
func nftLayout(cfg *Config) []nftChain {
	b := nftBuild(cfg)
	var out []nftChain
	for _, t := range nftTableOrder {
		chains := map[string][]string{}
		for _, o := range b.ops[t.name] {
			l := chains[o.chain]
			if o.index < 0 || o.index >= len(l) {
				l = append(l, o.expr)
			} else {
				l = slices.Insert(l, o.index, o.expr)
			}
			chains[o.chain] = l
		}
		// A jump to a chain left empty (DNS capture of IPv6 resolvers only, IPv6 off) would fail
		// the transaction in Istio; the chain is declared empty instead.
		for _, o := range b.ops[t.name] {
			if _, target, ok := strings.Cut(o.expr, "jump "); ok {
				if _, has := chains[target]; !has {
					chains[target] = nil
				}
			}
		}
		for _, c := range t.chains {
			if l, ok := chains[c.name]; ok {
				out = append(out, nftChain{t.name, c.name, l})
			}
		}
	}
	return out
}

// NftScript is the nft -f input that installs the capture: each table Istio would fill is
// replaced whole (added, deleted, added again with its chains and rules), and one it would leave
// empty is removed (a capture with another mode left nothing behind), in one transaction.
func NftScript(cfg *Config) string {
	layout := nftLayout(cfg)
	var b strings.Builder
	for _, t := range nftTableOrder {
		fmt.Fprintf(&b, "add table inet %s\ndelete table inet %[1]s\n", t.name)
		var mine []nftChain
		for _, c := range layout {
			if c.table == t.name {
				mine = append(mine, c)
			}
		}
		if len(mine) == 0 {
			continue
		}
		fmt.Fprintf(&b, "add table inet %s\n", t.name)
		for _, c := range mine {
			decl := ""
			for _, d := range t.chains {
				if d.name == c.chain && d.base != "" {
					decl = " { " + d.base + " }"
				}
			}
			fmt.Fprintf(&b, "add chain inet %s %s%s\n", t.name, c.chain, decl)
		}
		for _, c := range mine {
			for _, r := range c.rules {
				fmt.Fprintf(&b, "add rule inet %s %s %s\n", t.name, c.chain, r)
			}
		}
	}
	return b.String()
}

// NftCleanupScript deletes the capture's tables (a missing table is fine), as Istio's
// cleanupTable does for each of its three.
func NftCleanupScript(tables []string) string {
	var b strings.Builder
	for _, t := range tables {
		fmt.Fprintf(&b, "add table inet %s\ndelete table inet %[1]s\n", t)
	}
	return b.String()
}

func (o *Options) runNft(ctx context.Context) error {
	cfg := &o.Config
	if o.CleanupOnly {
		RemoveRoutes(ctx, o.Runner, cfg)
		_, err := o.Runner.Run(ctx, NftCleanupScript(NftTables(cfg)), "nft", "-f", "-")
		return err
	}
	o.Log.Info("applying native nftables", "tables", strings.Join(NftTables(cfg), ","))
	if _, err := o.Runner.Run(ctx, NftScript(cfg), "nft", "-f", "-"); err != nil {
		return err
	}
	// Verify: every table holds the planned number of rules (each of Istio's rules has a counter).
	want := map[string]int{}
	for _, c := range nftLayout(cfg) {
		want[c.table] += len(c.rules)
	}
	for _, t := range NftTables(cfg) {
		if want[t] == 0 {
			continue
		}
		out, err := o.Runner.Run(ctx, "", "nft", "list", "table", "inet", t)
		if err != nil {
			return fmt.Errorf("verifying %s: %w", t, err)
		}
		if got := strings.Count(out, "counter packets"); got != want[t] {
			return fmt.Errorf("verifying %s: %d rules in the kernel, want %d", t, got, want[t])
		}
	}
	return ConfigureRoutes(ctx, o.Runner, cfg)
}
