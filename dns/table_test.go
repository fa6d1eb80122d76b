package dns

import (
	"slices"
	"testing"

	"github.com/wingman-mesh/wingman/internal/ndspb"
)

func TestAltNames(t *testing.T) {
	n := newNaming("ns1", "ns1.svc.cluster.local", []string{"ns1.svc.cluster.local", "svc.cluster.local"})
	if n.domain != "svc.cluster.local" || n.domainL1 != "svc" || n.search != "ns1.svc.cluster.local." {
		t.Fatalf("naming %+v", n)
	}
	withAlt := kube("a", "ns1", "10.0.0.1")
	withAlt.AltHosts = []string{"Alias.Example.Org"}
	for _, c := range []struct {
		host string
		ni   *ndspb.NameTable_NameInfo
		want []string
	}{
		{"a.ns1.svc.cluster.local", withAlt, []string{"a.ns1.svc.cluster.local.", "a.ns1.", "a.", "a.ns1.svc.", "alias.example.org."}},
		{"b.ns2.svc.cluster.local", kube("b", "ns2"), []string{"b.ns2.svc.cluster.local.", "b.ns2.", "b.ns2.svc."}},
		// Another cluster's domain: no short forms (GenerateAltHosts' HasSuffix test).
		{"c.ns1.svc.other.local", kube("c", "ns1"), []string{"c.ns1.svc.other.local."}},
		// Istio's domain test is a plain string suffix, not a label boundary: a host that only
		// looks alike gets the short forms too.
		{"d.ns1.xsvc.cluster.local", kube("d", "ns1"), []string{"d.ns1.xsvc.cluster.local.", "d.ns1.", "d.", "d.ns1.svc."}},
		// GenerateAltHosts returns no name for a Kubernetes host written with a trailing dot.
		{"e.ns1.svc.cluster.local.", kube("e", "ns1"), nil},
		// Other registries answer only to the host; alt_hosts are ignored as in Istio.
		{"WWW.Example.COM.", &ndspb.NameTable_NameInfo{Registry: "External", AltHosts: []string{"x"}}, []string{"www.example.com."}},
	} {
		if got := n.altNames(c.host, c.ni); !slices.Equal(got, c.want) {
			t.Errorf("altNames(%s) = %q, want %q", c.host, got, c.want)
		}
	}
	// A domain given without the namespace label works the same.
	if n2 := newNaming("ns1", "svc.cluster.local.", nil); n2.domain != "svc.cluster.local" || n2.search != "" {
		t.Fatalf("naming %+v", n2)
	}
}

func TestBuildTableConflicts(t *testing.T) {
	n := newNaming("ns1", "ns1.svc.cluster.local", []string{"ns1.svc.cluster.local"})
	nt := &ndspb.NameTable{Table: map[string]*ndspb.NameTable_NameInfo{
		// "svc1.ns1." is generated for the Kubernetes service and is also a ServiceEntry
		// host: the host's own name wins.
		"svc1.ns1.svc.cluster.local": kube("svc1", "ns1", "10.0.0.1"),
		"svc1.ns1":                   external("10.0.0.2"),
		// The same alt host from two services: the smaller host name wins.
		"b.ns1.svc.cluster.local": func() *ndspb.NameTable_NameInfo {
			ni := kube("b", "ns1", "10.0.1.2")
			ni.AltHosts = []string{"shared.example"}
			return ni
		}(),
		"a.ns1.svc.cluster.local": func() *ndspb.NameTable_NameInfo {
			ni := kube("a", "ns1", "10.0.1.1")
			ni.AltHosts = []string{"shared.example"}
			return ni
		}(),
		"dup.example":    external("10.0.2.1", "10.0.2.1", "::ffff:10.0.2.1", "fe80::1%eth0", "junk"),
		"bad..example":   external("10.0.3.1"),
		"noip.example":   external(),
		"*.wild.example": external("10.0.4.1"),
	}}
	tab := buildTable(nt, n)
	ip := func(name string) string {
		e := tab.names[name]
		if e == nil || len(e.a) < aTail {
			return ""
		}
		return string(rune('0' + e.a[aTail-1])) // last octet, enough to tell entries apart
	}
	if ip("svc1.ns1.") != "2" || ip("svc1.") != "1" || ip("shared.example.") != "1" {
		t.Fatalf("conflicts: svc1.ns1.=%q svc1.=%q shared=%q", ip("svc1.ns1."), ip("svc1."), ip("shared.example."))
	}
	// Duplicates are folded (RFC 2181 §5.2, see PARITY.md) and zones dropped; an IPv4-mapped
	// address stays an AAAA as in Istio's ParseIPsSplitToV4V6 (netip Is6).
	if e := tab.names["dup.example."]; e == nil || len(e.a) != aTail || len(e.aaaa) != 2*aaaaTail {
		t.Fatalf("dup.example: %d A bytes %d AAAA bytes, want one A and two AAAA", len(e.a), len(e.aaaa))
	}
	if tab.skipped != 2 || tab.names["noip.example."] != nil {
		t.Fatalf("skipped %d, want 2 (bad name, no IP)", tab.skipped)
	}
	// Shortcuts point at the entry of the shorter name and never shadow a real name.
	if e := tab.names["svc1.ns1.ns1.svc.cluster.local."]; e == nil || e.target != tab.names["svc1.ns1."] {
		t.Fatal("svc1.ns1.<search> is not a shortcut to svc1.ns1.")
	}
	if e := tab.names["svc1.ns1.svc.cluster.local."]; e == nil || e.target != nil {
		t.Fatal("a real name became a shortcut")
	}
	if !tab.wildcards || tab.lookup([]byte("x.y.wild.example."), make([]byte, 0, 258)) != tab.names["*.wild.example."] {
		t.Fatal("wildcard lookup failed")
	}
	if tab.lookup([]byte("wild.example."), make([]byte, 0, 258)) != nil {
		t.Fatal("a wildcard matched its own base name")
	}
}

func TestValidName(t *testing.T) {
	long := ""
	for range 5 {
		long += "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa." // 50 bytes
	}
	for name, want := range map[string]bool{
		"a.": true, "*.b.c.": true, "x_y.example.": true, ".": false, "a..b.": false,
		"sp ace.": false, "back\\slash.": false, long: true, long + "abcde.": false,
		string(make([]byte, 64)) + ".": false,
	} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParseResolvConf(t *testing.T) {
	rc, err := parseResolvConf([]byte("# comment\nnameserver 10.96.0.10\nnameserver fd00::10\n" +
		"nameserver 127.0.0.1:5353\nnameserver [::1]:5354\ndomain x.local\nsearch a.svc b.svc\noptions ndots:5\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range rc.servers {
		got = append(got, s.String())
	}
	want := []string{"10.96.0.10:53", "[fd00::10]:53", "127.0.0.1:5353", "[::1]:5354"}
	if !slices.Equal(got, want) || !slices.Equal(rc.search, []string{"a.svc", "b.svc"}) {
		t.Fatalf("servers %v search %v", got, rc.search)
	}
	if _, err := parseResolvConf([]byte("nameserver dns.example\n")); err == nil {
		t.Fatal("a host name as nameserver was accepted")
	}
	if _, err := readResolvConf("/nonexistent/resolv.conf"); err == nil {
		t.Fatal("a missing resolv.conf was accepted")
	}
}
