package capture

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the current rules")

// A scenario is one flag combination: its golden rule set (testdata/golden/NAME.golden, the
// --dry-run output) and the traffic that must behave as Istio documents for those flags.
// The rules were written from Istio's source (tools/istio-iptables/pkg/capture/run.go: the
// order of exclusions, owner exemptions, DNS chains and TPROXY marks); a golden file is only
// trusted because the same rules, applied in a namespace, pass the scenario's traffic checks.
type scenario struct {
	name   string
	set    func(*Options)
	checks []check
}

// check dials from a namespace ("pod" or "peer") as uid and expects the answer to start with
// want: "envoy-out 15001 <orig>" (captured outbound), "envoy-in 15006 <orig>" (captured
// inbound), "agent 15053" (DNS captured), "peer ..." or "app ..." (not captured).
type check struct {
	from  string
	uid   int
	proto string
	addr  string
	want  string
}

const appUID = 1000

// base is the injection template's command line: -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*'
// -x "" -b '*' -d 15090,15021,15020.
func base() Options {
	c := Defaults()
	c.ProxyUIDs, c.ProxyGIDs = []string{"1337"}, []string{"1337"}
	c.InboundPorts = Ports{All: true}
	c.InboundPortsExclude = Ports{Items: []string{"15090", "15021", "15020"}}
	c.OutboundCIDRs = CIDRs{All: true}
	return Options{Config: c}
}

var peer1, peer3 = "10.99.0.1", "10.99.0.3"

func ap(a, p string) string { return netip.AddrPortFrom(netip.MustParseAddr(a), mustPort(p)).String() }

func mustPort(p string) uint16 { v, _ := ParsePort(p); return v }

// The checks every REDIRECT-mode capture of all traffic passes, per family.
func redirectChecks(pod, p1 string) []check {
	return []check{
		{"pod", appUID, "tcp", ap(p1, "80"), "envoy-out 15001 " + ap(p1, "80")},
		{"pod", 1337, "tcp", ap(p1, "80"), "peer 80 " + ap(p1, "80")},
		{"peer", 0, "tcp", ap(pod, "8080"), "envoy-in 15006 " + ap(pod, "8080")},
		{"peer", 0, "tcp", ap(pod, "15020"), "app 15020"},
		{"pod", appUID, "udp", ap(p1, "53"), "peer-dns 53"}, // DNS not asked for: UDP untouched
		{"pod", appUID, "tcp", ap("127.0.0.1", "8080"), "app 8080"},
	}
}

func scenarios() []scenario {
	return []scenario{
		{name: "redirect-all", set: func(o *Options) {},
			checks: redirectChecks("10.99.0.2", peer1)},
		{name: "exclusions", set: func(o *Options) {
			o.Config.OutboundCIDRsExclude, _ = ParseCIDRs(peer3 + "/32")
			o.Config.OutboundPortsExclude, _ = ParsePorts("81")
			o.Config.InboundPortsExclude, _ = ParsePorts("8080")
		}, checks: []check{
			{"pod", appUID, "tcp", ap(peer1, "80"), "envoy-out 15001 " + ap(peer1, "80")},
			{"pod", appUID, "tcp", ap(peer3, "80"), "peer 80 " + ap(peer3, "80")},
			{"pod", appUID, "tcp", ap(peer1, "81"), "peer 81 " + ap(peer1, "81")},
			{"peer", 0, "tcp", ap("10.99.0.2", "8080"), "app 8080"},
			{"peer", 0, "tcp", ap("10.99.0.2", "15020"), "envoy-in 15006"},
		}},
		{name: "include-lists", set: func(o *Options) {
			o.Config.OutboundCIDRs, _ = ParseCIDRs(peer1 + "/32")
			o.Config.OutboundPorts, _ = ParsePorts("81")
			o.Config.InboundPorts, _ = ParsePorts("8080")
		}, checks: []check{
			{"pod", appUID, "tcp", ap(peer1, "80"), "envoy-out 15001 " + ap(peer1, "80")},
			{"pod", appUID, "tcp", ap(peer3, "80"), "peer 80"},
			{"pod", appUID, "tcp", ap(peer3, "81"), "envoy-out 15001 " + ap(peer3, "81")},
			{"peer", 0, "tcp", ap("10.99.0.2", "8080"), "envoy-in 15006"},
			{"peer", 0, "tcp", ap("10.99.0.2", "15020"), "app 15020"},
		}},
		{name: "dns-resolvers", set: func(o *Options) {
			o.Config.RedirectDNS = true
			o.Config.DNSServers = []netip.Addr{netip.MustParseAddr(peer1)}
		}, checks: []check{
			{"pod", appUID, "udp", ap(peer1, "53"), "agent 15053"},
			{"pod", appUID, "tcp", ap(peer1, "53"), "agent 15053 " + ap(peer1, "53")},
			{"pod", 1337, "udp", ap(peer1, "53"), "peer-dns 53"},
			{"pod", appUID, "udp", ap(peer3, "53"), "peer-dns 53"}, // not a resolver
			{"pod", appUID, "tcp", ap(peer1, "80"), "envoy-out 15001"},
		}},
		{name: "dns-local-resolver", set: func(o *Options) {
			// A resolver on the pod's own address is reached over lo: TCP DNS to it is still
			// captured (the lo exemptions of both the uid and the gid spare port 53).
			o.Config.RedirectDNS = true
			o.Config.DNSServers = []netip.Addr{netip.MustParseAddr("10.99.0.2")}
		}, checks: []check{
			{"pod", appUID, "tcp", ap("10.99.0.2", "53"), "agent 15053 " + ap("10.99.0.2", "53")},
			{"pod", appUID, "udp", ap("10.99.0.2", "53"), "agent 15053"},
			{"pod", appUID, "tcp", ap("10.99.0.2", "8080"), "app 8080"}, // app to itself: untouched
		}},
		{name: "dns-capture-all", set: func(o *Options) {
			o.Config.RedirectDNS, o.Config.CaptureAllDNS = true, true
		}, checks: []check{
			{"pod", appUID, "udp", ap(peer3, "53"), "agent 15053"},
			{"pod", appUID, "tcp", ap(peer3, "53"), "agent 15053"},
			{"pod", 1337, "udp", ap(peer3, "53"), "peer-dns 53"},
		}},
		{name: "dns-no-resolvers", set: func(o *Options) {
			o.Config.RedirectDNS = true // Istio: nothing to capture, so DNS is left alone
		}, checks: []check{
			{"pod", appUID, "udp", ap(peer1, "53"), "peer-dns 53"},
		}},
		{name: "exclude-interface", set: func(o *Options) {
			o.Config.ExcludeInterfaces = []string{"wm0"}
		}, checks: []check{
			{"pod", appUID, "tcp", ap(peer1, "80"), "peer 80"},
			{"peer", 0, "tcp", ap("10.99.0.2", "8080"), "app 8080"},
		}},
		{name: "kube-virt-interface", set: func(o *Options) {
			// Traffic a VM sends in through wm0 is the VM's outbound: to Envoy's outbound port.
			o.Config.VirtInterfaces = []string{"wm0"}
		}, checks: []check{
			{"peer", 0, "tcp", ap("10.99.0.2", "8080"), "envoy-out 15001 " + ap("10.99.0.2", "8080")},
			{"pod", appUID, "tcp", ap(peer1, "80"), "envoy-out 15001"},
		}},
		{name: "owner-groups-exclude", set: func(o *Options) {
			o.Config.OwnerGroupsExclude = []string{"1000"}
		}, checks: []check{
			{"pod", appUID, "tcp", ap(peer1, "80"), "peer 80"},
			{"pod", 2000, "tcp", ap(peer1, "80"), "envoy-out 15001"},
		}},
		{name: "owner-groups-include", set: func(o *Options) {
			o.Config.OwnerGroupsOnly, o.Config.OwnerGroupsInclude = true, []string{"2000"}
		}, checks: []check{
			{"pod", appUID, "tcp", ap(peer1, "80"), "peer 80"},
			{"pod", 2000, "tcp", ap(peer1, "80"), "envoy-out 15001"},
		}},
		{name: "ipv6", set: func(o *Options) {
			o.Config.IPv6 = true
			o.Config.RedirectDNS = true
			o.Config.DNSServers = []netip.Addr{netip.MustParseAddr("fd00:99::1")}
			o.Config.OutboundCIDRsExclude, _ = ParseCIDRs("fd00:99::3/128")
		}, checks: append(redirectChecks("fd00:99::2", "fd00:99::1")[:4],
			check{"pod", appUID, "tcp", ap("fd00:99::3", "80"), "peer 80"},
			check{"pod", appUID, "udp", ap("fd00:99::1", "53"), "agent 15053"},
			check{"pod", appUID, "tcp", ap(peer1, "80"), "envoy-out 15001"},
			check{"peer", 0, "tcp", ap("10.99.0.2", "8080"), "envoy-in 15006"},
		)},
		{name: "tproxy", set: func(o *Options) {
			o.Config.Mode = TProxy
		}, checks: []check{
			{"pod", appUID, "tcp", ap(peer1, "80"), "envoy-out 15001 " + ap(peer1, "80")},
			{"peer", 0, "tcp", ap("10.99.0.2", "8080"), "envoy-in 15006 " + ap("10.99.0.2", "8080")},
			{"peer", 0, "tcp", ap("10.99.0.2", "15020"), "app 15020"},
			{"pod", 1337, "tcp", ap(peer1, "80"), "peer 80"},
		}},
		{name: "nftables", set: func(o *Options) {
			o.NativeNftables = true
			o.Config.RedirectDNS = true
			o.Config.DNSServers = []netip.Addr{netip.MustParseAddr(peer1)}
			o.Config.OutboundCIDRsExclude, _ = ParseCIDRs(peer3 + "/32")
		}, checks: append(redirectChecks("10.99.0.2", peer1)[:4],
			check{"pod", appUID, "udp", ap(peer1, "53"), "agent 15053"},
			check{"pod", appUID, "tcp", ap(peer3, "80"), "peer 80"},
			// IPv6 is off, yet Istio's inet rules that name no address capture IPv6 too.
			check{"pod", appUID, "tcp", ap("fd00:99::1", "80"), "envoy-out 15001 " + ap("fd00:99::1", "80")},
			check{"peer", 0, "tcp", ap("fd00:99::2", "8080"), "envoy-in 15006 " + ap("fd00:99::2", "8080")},
		)},
		{name: "nftables-ipv6-tproxy", set: func(o *Options) {
			o.NativeNftables = true
			o.Config.IPv6 = true
			o.Config.Mode = TProxy
		}, checks: []check{
			{"pod", appUID, "tcp", ap("fd00:99::1", "80"), "envoy-out 15001 " + ap("fd00:99::1", "80")},
			{"peer", 0, "tcp", ap("fd00:99::2", "8080"), "envoy-in 15006 " + ap("fd00:99::2", "8080")},
			{"peer", 0, "tcp", ap("10.99.0.2", "8080"), "envoy-in 15006 " + ap("10.99.0.2", "8080")},
			{"pod", 1337, "tcp", ap("fd00:99::1", "80"), "peer 80"},
		}},
		{name: "legacy", set: func(o *Options) {
			o.ForceBinary = "legacy"
		}, checks: redirectChecks("10.99.0.2", peer1)},
	}
}

func (s scenario) options() Options {
	o := base()
	s.set(&o)
	return o
}

// TestGolden compares each scenario's --dry-run output with its golden file.
func TestGolden(t *testing.T) {
	for _, s := range scenarios() {
		o := s.options()
		if o.NativeNftables {
			// Native nftables rules are checked against expectations written from Istio's
			// tools/istio-nftables source (nftparity_test.go), not against a recording.
			continue
		}
		o.DryRun = true
		var b bytes.Buffer
		o.Out = &b
		if err := Run(t.Context(), o); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		path := filepath.Join("testdata", "golden", s.name+".golden")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run go test -run TestGolden -update)", s.name, err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s: dry-run output differs from %s:\n%s", s.name, path, b.String())
		}
	}
}

// TestTraffic applies each scenario's rules in a fresh pod namespace and checks the traffic.
func TestTraffic(t *testing.T) {
	for _, s := range scenarios() {
		t.Run(s.name, func(t *testing.T) {
			l := newLab(t)
			o := s.options()
			if err := l.apply(o); err != nil {
				t.Fatalf("apply: %v", err)
			}
			// The pod's listeners run as the proxy uid, as Envoy and the agent do (the DNS
			// conntrack zones depend on it); TPROXY's transparent listener needs root's
			// CAP_NET_ADMIN (Envoy is given it in that mode).
			transparent, podUID := "", 1337
			if o.Config.Mode == TProxy {
				transparent, podUID = ":transparent", 0
			}
			l.listen(l.pod, podUID, "tcp:15001:envoy-out", "tcp:15006:envoy-in"+transparent, "tcp:15020:app", "tcp:8080:app",
				"udp:15053:agent", "tcp:15053:agent")
			l.listen(l.peer, 0, "tcp:80:peer", "tcp:81:peer", "tcp:53:peer-dns", "udp:53:peer-dns")
			for _, c := range s.checks {
				ns := l.pod
				if c.from == "peer" {
					ns = l.peer
				}
				if got := l.dial(ns, c.uid, c.proto, c.addr); !strings.HasPrefix(got, c.want) {
					t.Errorf("%s uid %d %s %s: got %q, want %q...", c.from, c.uid, c.proto, c.addr, got, c.want)
				}
			}
		})
	}
}
