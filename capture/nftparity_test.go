package capture

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// The expectations in this file are Istio's native nftables rules, read from istio/istio
// tools/istio-nftables/pkg/capture/run.go (stored commit baa5687, the newest stored copy:
// counters on every rule, the mangle output chain of type route) and written out by hand for
// each configuration by following NftablesConfigurator.Run; never from this package's output.
// Names are constants.go's; "v6 only if enabled" is builder/nftables_builder_impl.go
// (AppendV6RuleIfSupported, InsertV6RuleIfSupported: added only when cfg.EnableIPv6); every
// other rule goes into the inet table once and so applies to both families.

// nftParsed is a script read back: each table's chains in declaration order with their base
// declarations, and each chain's rules.
type nftParsed struct {
	tables []string            // tables created (after the delete that empties a stale one)
	chains map[string][]string // table -> "name" or "name { decl }", in order
	rules  map[string][]string // "table chain" -> rules
}

func parseNftScript(t *testing.T, s string) nftParsed {
	t.Helper()
	p := nftParsed{chains: map[string][]string{}, rules: map[string][]string{}}
	seenDelete := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "delete" && f[1] == "table":
			seenDelete[f[3]] = true
		case len(f) == 4 && f[0] == "add" && f[1] == "table":
			if seenDelete[f[3]] {
				p.tables = append(p.tables, f[3])
			}
		case len(f) >= 5 && f[0] == "add" && f[1] == "chain":
			p.chains[f[3]] = append(p.chains[f[3]], strings.Join(f[4:], " "))
		case len(f) >= 6 && f[0] == "add" && f[1] == "rule":
			k := f[3] + " " + f[4]
			p.rules[k] = append(p.rules[k], strings.Join(f[5:], " "))
		default:
			t.Fatalf("unexpected script line %q", line)
		}
	}
	return p
}

type nftWant struct {
	tables []string
	chains map[string][]string
	rules  map[string][]string
}

func checkNft(t *testing.T, cfg Config, w nftWant) {
	t.Helper()
	got := parseNftScript(t, NftScript(&cfg))
	if !slices.Equal(got.tables, w.tables) {
		t.Errorf("tables: got %q, want %q", got.tables, w.tables)
	}
	for tbl, want := range w.chains {
		if !slices.Equal(got.chains[tbl], want) {
			t.Errorf("%s chains:\ngot  %q\nwant %q", tbl, got.chains[tbl], want)
		}
	}
	for k := range got.chains {
		if _, ok := w.chains[k]; !ok {
			t.Errorf("unexpected chains in %s: %q", k, got.chains[k])
		}
	}
	for k, want := range w.rules {
		if !slices.Equal(got.rules[k], want) {
			t.Errorf("%s:\ngot:\n  %s\nwant:\n  %s", k, strings.Join(got.rules[k], "\n  "), strings.Join(want, "\n  "))
		}
	}
	for k := range got.rules {
		if _, ok := w.rules[k]; !ok {
			t.Errorf("unexpected chain %s: %q", k, got.rules[k])
		}
	}
}

// Base chains as addIstioNatTableRules / addIstioMangleTableRules / addIstioRawTableRules
// declare them (knftables NATType/FilterType/RouteType, DNATPriority/ManglePriority/
// RawPriority). nat output: Istio asks for DNATPriority, the value -100 (nft 1.0.6 takes the
// name dstnat only at prerouting).
const (
	natPre     = "prerouting { type nat hook prerouting priority dstnat; policy accept; }"
	natOut     = "output { type nat hook output priority -100; policy accept; }"
	manglePre  = "prerouting { type filter hook prerouting priority mangle; policy accept; }"
	mangleOut  = "output { type route hook output priority mangle; policy accept; }"
	rawPre     = "prerouting { type filter hook prerouting priority raw; policy accept; }"
	rawOut     = "output { type filter hook output priority raw; policy accept; }"
	natTbl     = "istio-proxy-nat"
	mangleTbl  = "istio-proxy-mangle"
	rawTbl     = "istio-proxy-raw"
	natChain   = natTbl + " "
	mangleChn  = mangleTbl + " "
	rawChain   = rawTbl + " "
	tunnelRet  = "meta l4proto tcp tcp dport 15008 counter return"
	redirOut   = "meta l4proto tcp counter redirect to :15001"
	redirIn    = "meta l4proto tcp counter redirect to :15006"
	passthru4  = "oifname lo ip saddr 127.0.0.6/32 counter return"
	loopback4  = "ip daddr 127.0.0.1/32 counter return"
	toRedirect = "counter jump istio-redirect"
)

// TestNftIstioRedirectDNS: the injection template's flags (-p 15001 -z 15006 -u 1337 -m
// REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020), IPv4 only, DNS capture of resolver
// 10.99.0.1, 10.99.0.3/32 excluded (the "nftables" traffic scenario).
func TestNftIstioRedirectDNS(t *testing.T) {
	o := base()
	o.Config.RedirectDNS = true
	o.Config.DNSServers = []netip.Addr{netip.MustParseAddr("10.99.0.1")}
	o.Config.OutboundCIDRsExclude, _ = ParseCIDRs("10.99.0.3/32")
	checkNft(t, o.Config, nftWant{
		// executeCommands: nat, mangle, raw; a table with no rules is not created.
		tables: []string{natTbl, rawTbl},
		chains: map[string][]string{
			// Only chains holding rules are declared (addIstioTableRules), in Istio's order.
			natTbl: {natPre, natOut, "istio-inbound", "istio-redirect", "istio-in-redirect", "istio-output", "istio-output-dns"},
			rawTbl: {rawPre, rawOut, "istio-inbound", "istio-output-dns"},
		},
		rules: map[string][]string{
			// handleInboundPortsInclude, REDIRECT.
			natChain + "prerouting": {"meta l4proto tcp counter jump istio-inbound"},
			// Run: "Send all output traffic to the output chain".
			natChain + "output": {"counter jump istio-output"},
			natChain + "istio-inbound": {
				tunnelRet, // Run: tunnel port first
				// handleInboundPortsInclude: "*" with exclusions, then the redirect.
				"meta l4proto tcp tcp dport 15090 counter return",
				"meta l4proto tcp tcp dport 15021 counter return",
				"meta l4proto tcp tcp dport 15020 counter return",
				"meta l4proto tcp counter jump istio-in-redirect",
			},
			natChain + "istio-redirect":    {redirOut},
			natChain + "istio-in-redirect": {redirIn},
			natChain + "istio-output": {
				passthru4, // Run: 127.0.0.6 (the ::6 rule is v6-only)
				// Run, ProxyUID loop with redirectDNS: ports { 53, tunnel }.
				"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 tcp dport != { 53, 15008 } skuid 1337 counter jump istio-in-redirect",
				"oifname lo meta l4proto tcp tcp dport != 53 skuid != 1337 counter return",
				"skuid 1337 counter return",
				// ProxyGID loop: no port-53 exception on the redirect, the lo return keeps it.
				"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 tcp dport != 15008 skgid 1337 counter jump istio-in-redirect",
				"oifname lo meta l4proto tcp tcp dport != 53 skgid != 1337 counter return",
				"skgid 1337 counter return",
				// SetupDNSRedir: the nat jump when resolvers (or capture-all) exist.
				"counter jump istio-output-dns",
				loopback4,
				"ip daddr 10.99.0.3/32 counter return", // ipv4RangesExclude
				toRedirect,                             // handleOutboundIncludeRules, wildcard
			},
			// SetupDNSRedir: TCP for every v4 resolver, then UDP.
			natChain + "istio-output-dns": {
				"ip daddr 10.99.0.1/32 tcp dport 53 counter redirect to :15053",
				"ip daddr 10.99.0.1/32 udp dport 53 counter redirect to :15053",
			},
			rawChain + "output": {"counter jump istio-output-dns"},
			// addDNSConntrackZones: the raw prerouting jump when resolvers exist.
			rawChain + "prerouting": {"counter jump istio-inbound"},
			rawChain + "istio-output-dns": {
				"udp dport 53 meta skuid 1337 counter ct zone set 1",
				"udp sport 15053 meta skuid 1337 counter ct zone set 2",
				"udp dport 53 meta skgid 1337 counter ct zone set 1",
				"udp sport 15053 meta skgid 1337 counter ct zone set 2",
				"udp dport 53 ip daddr 10.99.0.1/32 counter ct zone set 2",
			},
			rawChain + "istio-inbound": {"udp sport 53 ip saddr 10.99.0.1/32 counter ct zone set 1"},
		},
	})
}

// TestNftIstioTProxyIPv6: TPROXY with IPv6 enabled (the "nftables-ipv6-tproxy" scenario).
func TestNftIstioTProxyIPv6(t *testing.T) {
	o := base()
	o.Config.Mode, o.Config.IPv6 = TProxy, true
	checkNft(t, o.Config, nftWant{
		tables: []string{natTbl, mangleTbl},
		chains: map[string][]string{
			// nat prerouting stays empty in TPROXY mode, so it is not declared.
			natTbl:    {natOut, "istio-inbound", "istio-redirect", "istio-in-redirect", "istio-output"},
			mangleTbl: {manglePre, mangleOut, "istio-divert", "istio-tproxy", "istio-inbound"},
		},
		rules: map[string][]string{
			natChain + "output":            {"counter jump istio-output"},
			natChain + "istio-inbound":     {tunnelRet}, // Run adds it in every mode
			natChain + "istio-redirect":    {redirOut},
			natChain + "istio-in-redirect": {redirIn},
			natChain + "istio-output": {
				passthru4,
				"oifname lo ip6 saddr ::6/128 counter return",
				// ProxyUID loop without DNS: the tunnel port alone, v4 then v6.
				"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 tcp dport != 15008 skuid 1337 counter jump istio-in-redirect",
				"oifname lo meta l4proto tcp ip6 daddr != ::1/128 tcp dport != 15008 skuid 1337 counter jump istio-in-redirect",
				"oifname lo skuid != 1337 counter return",
				"skuid 1337 counter return",
				"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 tcp dport != 15008 skgid 1337 counter jump istio-in-redirect",
				"oifname lo meta l4proto tcp ip6 daddr != ::1/128 tcp dport != 15008 skgid 1337 counter jump istio-in-redirect",
				"oifname lo skgid != 1337 counter return",
				"skgid 1337 counter return",
				loopback4,
				"ip6 daddr ::1/128 counter return",
				toRedirect,
			},
			// handleInboundTProxyMode, then the TPROXY block at the end of Run.
			mangleChn + "prerouting": {
				"meta l4proto tcp counter jump istio-inbound",
				"meta l4proto tcp mark 1337 counter ct mark set mark",
			},
			mangleChn + "output": {
				"oifname lo meta l4proto tcp mark 1337 counter return",
				"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 skuid 1337 counter meta mark set 1338",
				"oifname lo meta l4proto tcp ip6 daddr != ::1/128 skuid 1337 counter meta mark set 1338",
				"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 skgid 1337 counter meta mark set 1338",
				"oifname lo meta l4proto tcp ip6 daddr != ::1/128 skgid 1337 counter meta mark set 1338",
				"meta l4proto tcp ct mark 1337 counter meta mark set ct mark",
			},
			mangleChn + "istio-divert": {"counter meta mark set 1337", "counter accept"},
			mangleChn + "istio-tproxy": {
				"meta l4proto tcp ip daddr != 127.0.0.1/32 tproxy ip to :15006 meta mark set 1337 counter accept",
				"meta l4proto tcp ip6 daddr != ::1/128 tproxy ip6 to :15006 meta mark set 1337 counter accept",
			},
			// The three inserts at indexes 0, 1 (v4, then v6 also at 1) and 2 land on the five
			// appended rules as nft's insert-at-index places them (addIstioTableRules).
			mangleChn + "istio-inbound": {
				"meta l4proto tcp mark 1337 counter return",
				"iifname lo meta l4proto tcp ip6 saddr ::6/128 counter return",
				"iifname lo meta l4proto tcp mark != 1338 counter return",
				"iifname lo meta l4proto tcp ip saddr 127.0.0.6/32 counter return",
				"meta l4proto tcp tcp dport 15090 counter return",
				"meta l4proto tcp tcp dport 15021 counter return",
				"meta l4proto tcp tcp dport 15020 counter return",
				"meta l4proto tcp ct state related,established counter jump istio-divert",
				"meta l4proto tcp counter jump istio-tproxy",
			},
		},
	})
}

// TestNftIstioIPv4OnlyOptions: IPv4 only, with capture of all DNS, an owner-group include
// list, a KubeVirt interface, an excluded interface, INVALID_DROP, an excluded outbound port
// and an include list naming an IPv6 range (dropped: IPv6 is off).
func TestNftIstioIPv4OnlyOptions(t *testing.T) {
	o := base()
	c := &o.Config
	c.RedirectDNS, c.CaptureAllDNS, c.DropInvalid = true, true, true
	c.OwnerGroupsOnly, c.OwnerGroupsInclude = true, []string{"2000", "3000"}
	c.VirtInterfaces, c.ExcludeInterfaces = []string{"wm0"}, []string{"veth9"}
	c.OutboundPortsExclude, _ = ParsePorts("81")
	c.OutboundCIDRs, _ = ParseCIDRs("10.96.0.0/12,fd00:96::/108")
	checkNft(t, o.Config, nftWant{
		tables: []string{natTbl, mangleTbl, rawTbl},
		chains: map[string][]string{
			natTbl:    {natPre, natOut, "istio-inbound", "istio-redirect", "istio-in-redirect", "istio-output", "istio-output-dns"},
			mangleTbl: {manglePre, "istio-drop"},
			rawTbl:    {rawPre, rawOut, "istio-inbound", "istio-output-dns"},
		},
		rules: map[string][]string{
			natChain + "prerouting": {
				// handleOutboundIncludeRules inserts at 0 last, shortCircuitKubeInternalInterface
				// inserted at 0 before it (ahead of shortCircuitExcludeInterfaces' append);
				// handleInboundPortsInclude appended the jump.
				"iifname wm0 ip daddr 10.96.0.0/12 counter jump istio-redirect",
				"iifname wm0 counter return",
				"iifname veth9 counter return",
				"meta l4proto tcp counter jump istio-inbound",
			},
			natChain + "output": {"oifname veth9 counter return", "counter jump istio-output"},
			natChain + "istio-inbound": {
				tunnelRet,
				"meta l4proto tcp tcp dport 15090 counter return",
				"meta l4proto tcp tcp dport 15021 counter return",
				"meta l4proto tcp tcp dport 15020 counter return",
				"meta l4proto tcp counter jump istio-in-redirect",
			},
			natChain + "istio-redirect":    {redirOut},
			natChain + "istio-in-redirect": {redirIn},
			natChain + "istio-output": {
				"tcp dport 81 counter return", // OutboundPortsExclude: tcp, then udp
				"udp dport 81 counter return",
				passthru4,
				"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 tcp dport != { 53, 15008 } skuid 1337 counter jump istio-in-redirect",
				"oifname lo meta l4proto tcp tcp dport != 53 skuid != 1337 counter return",
				"skuid 1337 counter return",
				"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 tcp dport != 15008 skgid 1337 counter jump istio-in-redirect",
				"oifname lo meta l4proto tcp tcp dport != 53 skgid != 1337 counter return",
				"skgid 1337 counter return",
				// handleCaptureByOwnerGroup: CombineMatchers of the include list in one rule.
				"skgid != 2000 skgid != 3000 counter return",
				"counter jump istio-output-dns",
				loopback4,
				"ip daddr 10.96.0.0/12 counter jump istio-redirect", // the fd00:96::/108 rule is v6-only
			},
			// SetupDNSRedir with captureAllDNS.
			natChain + "istio-output-dns": {
				"meta l4proto tcp tcp dport 53 counter redirect to :15053",
				"udp dport 53 counter redirect to :15053",
			},
			// Run: INVALID_DROP.
			mangleChn + "prerouting": {"meta l4proto tcp ct state invalid counter jump istio-drop"},
			mangleChn + "istio-drop": {"counter drop"},
			rawChain + "output":      {"counter jump istio-output-dns"},
			rawChain + "prerouting":  {"counter jump istio-inbound"},
			rawChain + "istio-output-dns": {
				"udp dport 53 meta skuid 1337 counter ct zone set 1",
				"udp sport 15053 meta skuid 1337 counter ct zone set 2",
				"udp dport 53 meta skgid 1337 counter ct zone set 1",
				"udp sport 15053 meta skgid 1337 counter ct zone set 2",
				"udp dport 53 counter ct zone set 2",
			},
			rawChain + "istio-inbound": {"udp sport 53 counter ct zone set 1"},
		},
	})
}

// TestNftCleanupIsIstios: clean-up adds then deletes each of Istio's three tables
// (cleanupTable, for nat, mangle and raw in executeCommands' order).
func TestNftCleanupIsIstios(t *testing.T) {
	c := base().Config
	want := "add table inet istio-proxy-nat\ndelete table inet istio-proxy-nat\n" +
		"add table inet istio-proxy-mangle\ndelete table inet istio-proxy-mangle\n" +
		"add table inet istio-proxy-raw\ndelete table inet istio-proxy-raw\n"
	if got := NftCleanupScript(NftTables(&c)); got != want {
		t.Errorf("clean-up script:\n%s\nwant:\n%s", got, want)
	}
}

// FuzzNftNames: interface, user and group names come from flags and variables; whatever the
// parsers accept lands in the nft script as one token of one rule (bare or quoted), never
// splitting a rule or starting a new statement.
func FuzzNftNames(f *testing.F) {
	for _, s := range []string{"eth0", "veth.1", "www-data", "user$", "1337", "a@b", "x:y", "lo", "a b", "a;b", "a\nb", `a"b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c := base().Config
		c.Mode = TProxy
		c.RedirectDNS, c.CaptureAllDNS = true, true
		ifcs, ierr := ParseInterfaces(name)
		owners, oerr := ParseOwners(name)
		if ierr != nil && oerr != nil {
			return
		}
		if ierr == nil {
			c.ExcludeInterfaces, c.VirtInterfaces = ifcs, ifcs
		}
		if oerr == nil && len(owners) > 0 {
			c.ProxyUIDs, c.ProxyGIDs, c.OwnerGroupsOnly, c.OwnerGroupsInclude = owners, owners, true, owners
		}
		script := NftScript(&c)
		p := parseNftScript(t, script) // every line is one statement of the known forms
		for _, n := range append(append([]string(nil), ifcs...), owners...) {
			tok := nftName(n)
			if tok != n && tok != `"`+n+`"` {
				t.Fatalf("name %q written as %q", n, tok)
			}
			if strings.ContainsAny(n, "\"\n;#{}") {
				t.Fatalf("parser accepted %q", n)
			}
		}
		if len(p.tables) == 0 {
			t.Fatalf("no table in:\n%s", script)
		}
	})
}

// TestNftIstioIPRange: the flags of Istio's own "ip-range" case (tools/istio-nftables/pkg/capture
// run_test.go getCommonTestCases: no inbound ports, include 9.9.0.0/16, exclude 1.1.0.0/16, DNS
// capture of 127.0.0.53, uids 3,4, gids 1,2, IPv4 only), its rules traced through Run by hand.
func TestNftIstioIPRange(t *testing.T) {
	c := Defaults()
	c.ProxyUIDs, c.ProxyGIDs = []string{"3", "4"}, []string{"1", "2"}
	c.OutboundCIDRs, _ = ParseCIDRs("9.9.0.0/16")
	c.OutboundCIDRsExclude, _ = ParseCIDRs("1.1.0.0/16")
	c.RedirectDNS = true
	c.DNSServers = []netip.Addr{netip.MustParseAddr("127.0.0.53")}
	var output, zones []string
	output = append(output, passthru4)
	for _, uid := range []string{"3", "4"} { // Run: the ProxyUID loop, redirectDNS
		output = append(output,
			"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 tcp dport != { 53, 15008 } skuid "+uid+" counter jump istio-in-redirect",
			"oifname lo meta l4proto tcp tcp dport != 53 skuid != "+uid+" counter return",
			"skuid "+uid+" counter return")
		zones = append(zones, // addDNSConntrackZones
			"udp dport 53 meta skuid "+uid+" counter ct zone set 1",
			"udp sport 15053 meta skuid "+uid+" counter ct zone set 2")
	}
	for _, gid := range []string{"1", "2"} { // the ProxyGID loop
		output = append(output,
			"oifname lo meta l4proto tcp ip daddr != 127.0.0.1/32 tcp dport != 15008 skgid "+gid+" counter jump istio-in-redirect",
			"oifname lo meta l4proto tcp tcp dport != 53 skgid != "+gid+" counter return",
			"skgid "+gid+" counter return")
		zones = append(zones,
			"udp dport 53 meta skgid "+gid+" counter ct zone set 1",
			"udp sport 15053 meta skgid "+gid+" counter ct zone set 2")
	}
	output = append(output,
		"counter jump istio-output-dns",
		loopback4,
		"ip daddr 1.1.0.0/16 counter return",
		// handleOutboundIncludeRules with a CIDR list: no catch-all jump.
		"ip daddr 9.9.0.0/16 counter jump istio-redirect")
	zones = append(zones, "udp dport 53 ip daddr 127.0.0.53/32 counter ct zone set 2")
	checkNft(t, c, nftWant{
		tables: []string{natTbl, rawTbl},
		chains: map[string][]string{
			// No inbound ports: nat prerouting holds nothing and is not declared.
			natTbl: {natOut, "istio-inbound", "istio-redirect", "istio-in-redirect", "istio-output", "istio-output-dns"},
			rawTbl: {rawPre, rawOut, "istio-inbound", "istio-output-dns"},
		},
		rules: map[string][]string{
			natChain + "output":            {"counter jump istio-output"},
			natChain + "istio-inbound":     {tunnelRet},
			natChain + "istio-redirect":    {redirOut},
			natChain + "istio-in-redirect": {redirIn},
			natChain + "istio-output":      output,
			natChain + "istio-output-dns": {
				"ip daddr 127.0.0.53/32 tcp dport 53 counter redirect to :15053",
				"ip daddr 127.0.0.53/32 udp dport 53 counter redirect to :15053",
			},
			rawChain + "output":           {"counter jump istio-output-dns"},
			rawChain + "prerouting":       {"counter jump istio-inbound"},
			rawChain + "istio-output-dns": zones,
			rawChain + "istio-inbound":    {"udp sport 53 ip saddr 127.0.0.53/32 counter ct zone set 1"},
		},
	})
}
