package node

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/bootstrap"
)

func ifaces(list ...Interface) func() ([]Interface, error) {
	return func() ([]Interface, error) { return list, nil }
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestDiscover(t *testing.T) {
	eth0 := Interface{Name: "eth0", Up: true, Addrs: addrs("10.0.0.5", "fe80::1", "fd00::5")}
	lo := Interface{Name: "lo", Up: true, Addrs: addrs("127.0.0.1", "::1")}
	net1 := Interface{Name: "net1", Up: true, Addrs: addrs("192.168.1.2")}
	down := Interface{Name: "eth9", Up: false, Addrs: addrs("172.16.0.1")}
	for _, tc := range []struct {
		name string
		cfg  Config
		ips  []string
		fam  string // bootstrap.AddressFamily's DNS lookup family for the IPs, dual stack on
		id   string
	}{
		{"instance ip first, dedup, no loopback/link-local",
			Config{Type: "sidecar", InstanceIP: netip.MustParseAddr("10.0.0.5"), PodName: "app-7d9", PodNamespace: "default",
				Interfaces: ifaces(lo, eth0, down)},
			[]string{"10.0.0.5", "fd00::5"}, "ALL", "sidecar~10.0.0.5~app-7d9.default~default.svc.cluster.local"},
		{"excluded interface", Config{Type: "sidecar", InstanceIP: netip.MustParseAddr("10.0.0.5"), PodName: "p", PodNamespace: "ns",
			Domain: "ns.svc.example.org", ExcludeInterfaces: []string{"net1"}, Interfaces: ifaces(eth0, net1)},
			[]string{"10.0.0.5", "fd00::5"}, "ALL", "sidecar~10.0.0.5~p.ns~ns.svc.example.org"},
		{"fallback", Config{Type: "router", PodName: "gw", PodNamespace: "istio-system", Interfaces: ifaces(lo), MaxWait: time.Millisecond},
			[]string{"127.0.0.1", "::1"}, "ALL", "router~127.0.0.1~gw.istio-system~istio-system.svc.cluster.local"},
		// Istio's initProxy (pilot/cmd/pilot-agent/app/cmd.go) adds 127.0.0.1 and ::1 whenever
		// GetPrivateIPs finds nothing, INSTANCE_IP or not, so the family becomes dual.
		{"INSTANCE_IP and no interface address", Config{Type: "sidecar", InstanceIP: netip.MustParseAddr("fd00::7"), Interfaces: ifaces(lo)},
			[]string{"fd00::7", "127.0.0.1", "::1"}, "ALL", "sidecar~fd00::7~.~.svc.cluster.local"},
		// initProxy adds the pair before it filters the excluded interfaces' addresses out.
		{"every interface excluded", Config{Type: "sidecar", InstanceIP: netip.MustParseAddr("10.0.0.5"),
			ExcludeInterfaces: []string{"eth0"}, Interfaces: ifaces(lo, eth0)},
			[]string{"10.0.0.5"}, "V4_ONLY", "sidecar~10.0.0.5~.~.svc.cluster.local"},
		{"v6 only", Config{Type: "sidecar", InstanceIP: netip.MustParseAddr("fd00::5"),
			Interfaces: ifaces(lo, Interface{Name: "eth0", Up: true, Addrs: addrs("fe80::1", "fd00::5")})},
			[]string{"fd00::5"}, "V6_ONLY", "sidecar~fd00::5~.~.svc.cluster.local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := Discover(t.Context(), tc.cfg)
			fam := bootstrap.AddressFamily(id.IPs, true).DNSLookupFamily
			nodeID := id.Type + "~" + id.IPs[0] + "~" + id.ID + "~" + id.DNSDomain
			if !slices.Equal(id.IPs, tc.ips) || fam != tc.fam || nodeID != tc.id {
				t.Errorf("got %v %v %q, want %v %v %q", id.IPs, fam, nodeID, tc.ips, tc.fam, tc.id)
			}
		})
	}
}

// TestNoLongWait: an interface stuck on an unspecified address delays discovery by MaxWait at
// most, and not at all when INSTANCE_IP is known.
func TestNoLongWait(t *testing.T) {
	calls := 0
	stuck := func() ([]Interface, error) {
		calls++
		return []Interface{{Name: "eth0", Up: true, Addrs: addrs("0.0.0.0")}}, nil
	}
	id := Discover(t.Context(), Config{InstanceIP: netip.MustParseAddr("10.0.0.9"), Interfaces: stuck})
	if calls != 1 || !slices.Equal(id.IPs, []string{"10.0.0.9", "127.0.0.1", "::1"}) {
		t.Errorf("with INSTANCE_IP: %d scans, ips %v", calls, id.IPs)
	}
	// Without INSTANCE_IP a stuck interface is scanned again until it has an address (MaxWait
	// long enough that no loaded machine reaches it)...
	calls = 0
	settles := func() ([]Interface, error) {
		calls++
		if calls < 3 {
			return []Interface{{Name: "eth0", Up: true, Addrs: addrs("0.0.0.0")}}, nil
		}
		return []Interface{{Name: "eth0", Up: true, Addrs: addrs("10.1.2.3")}}, nil
	}
	id = Discover(t.Context(), Config{Interfaces: settles, MaxWait: time.Minute, RetryEvery: time.Millisecond})
	if calls != 3 || !slices.Equal(id.IPs, []string{"10.1.2.3"}) {
		t.Errorf("without INSTANCE_IP, an address on the third scan: %d scans, ips %v", calls, id.IPs)
	}
	// ...or until MaxWait: retries RetryEvery apart fit at most MaxWait/RetryEvery of them after
	// the first scan (a loaded machine makes fewer, never more), and then the loopback fallback.
	calls = 0
	id = Discover(t.Context(), Config{Interfaces: stuck, MaxWait: 50 * time.Millisecond, RetryEvery: 10 * time.Millisecond})
	if calls < 1 || calls > 6 || !slices.Equal(id.IPs, []string{"127.0.0.1", "::1"}) {
		t.Errorf("without INSTANCE_IP, stuck: %d scans, ips %v", calls, id.IPs)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls = 0
	Discover(ctx, Config{Interfaces: stuck, MaxWait: time.Hour})
	if calls != 1 {
		t.Errorf("cancelled: %d scans", calls)
	}
}

func TestSystemInterfaces(t *testing.T) {
	ifs, err := SystemInterfaces()
	if err != nil || len(ifs) == 0 {
		t.Fatalf("SystemInterfaces = %v, %v", ifs, err)
	}
}

func TestParseAnnotations(t *testing.T) {
	m, err := ParseAnnotations([]byte("a=\"1\"\n\ntraffic.sidecar.istio.io/excludeInterfaces=\"net1, net2\"\n" +
		"proxy.istio.io/config=\"{\\\"a\\\": \\\"b\\\\n\\\"}\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m["a"] != "1" || m["proxy.istio.io/config"] != "{\"a\": \"b\\n\"}" ||
		!slices.Equal(SplitList(m[ExcludeInterfacesAnnotation]), []string{"net1", "net2"}) {
		t.Errorf("parsed %q", m)
	}
	for _, bad := range []string{"novalue\n", "k=unquoted\n", "k=\"open\n"} {
		if _, err := ParseAnnotations([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseAnnotations(f *testing.F) {
	f.Add([]byte("a=\"1\"\nb=\"x\\ny\"\n"))
	f.Add([]byte("=\"\"\n\n k = \"\\u00e9\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseAnnotations(b)
		if err == nil && m == nil {
			t.Fatal("nil map without error")
		}
	})
}
