package dns

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	mdns "github.com/miekg/dns"

	"github.com/wingman-mesh/wingman/internal/ndspb"
)

// This file compares the proxy's answers with Istio's agent for one realistic NameTable.
// Every expectation below is Istio's answer, established by reading Istio's source (istio/istio
// master, 2026: pkg/dns/client/dns.go NewLocalDNSServer, UpdateLookupTable,
// BuildAlternateHosts, buildDNSAnswers, lookupHost, ServeDNS, queryUpstream, size/ednsSize;
// pkg/dns/util.go GenerateAltHosts; pkg/util/net ParseIPsSplitToV4V6; miekg/dns v1.1.73
// Msg.SetReply, Msg.Truncate, Client.Exchange and the server's default MsgAcceptFunc); the
// "why" of each case names the function that decides it. Where we answer differently on
// purpose, the case (or the global rule in ourAnswer) names the dns/PARITY.md entry that
// gives the RFC; TestParityDocListsEveryDifference checks those entries exist.

// parityTable is a realistic NameTable, as Istiod would push it to a sidecar in ns1 of
// cluster.local: Kubernetes services with short names, namespaces, alt hosts, a headless
// service, dual-stack and IPv6-only hosts, ServiceEntries with wildcards, a service from
// another cluster domain, and an entry without a usable address.
func parityTable() map[string]*ndspb.NameTable_NameInfo {
	details := kube("details", "ns1", "10.0.0.3")
	details.AltHosts = []string{"details.alias.example.org"}
	return map[string]*ndspb.NameTable_NameInfo{
		"productpage.ns1.svc.cluster.local": kube("productpage", "ns1", "10.0.0.1"),
		"reviews.ns2.svc.cluster.local":     kube("reviews", "ns2", "10.0.0.2", "2001:db8::2"),
		"details.ns1.svc.cluster.local":     details,
		"headless.ns1.svc.cluster.local":    kube("headless", "ns1", "10.1.0.1", "10.1.0.2", "10.1.0.3"),
		"ratings.ns3.svc.remote.local":      kube("ratings", "ns3", "10.3.0.1"),
		"www.google.com":                    external("1.1.1.1"),
		"*.wild.com":                        external("2.2.2.2"),
		"v6only.example.com":                external("2001:db8::6"),
		"db.mesh.internal":                  external("10.2.0.1", "10.2.0.2", "::ffff:10.2.0.3"),
		"bad.example.com":                   external("not-an-ip"),
		"dup.mesh.internal":                 external("10.5.0.1", "10.5.0.1"),
		"noshort.ns1.svc.cluster.local":     kube("", "ns1", "10.6.0.1"),
	}
}

// answer is one reply as the comparison sees it.
type answer struct {
	forwarded bool // the upstream was asked exactly once and its reply relayed
	rcode     int
	aa, ra    bool
	opt       bool     // the reply carries an OPT record
	records   []string // "owner TYPE value"; CNAMEs in order first, then addresses sorted
}

type parityCase struct {
	name   string
	qtype  uint16
	qclass uint16          // 0: IN
	edns   uint16          // 0: no OPT
	mutate func(*mdns.Msg) // changes the query before it is sent
	istio  answer
	why    string
	// ours is set where the answer differs from Istio's beyond the global rules of
	// ourAnswer; diff names the PARITY.md entry.
	ours *answer
	diff string
}

// local is an answer from the lookup table as Istio's ServeDNS builds it: SetReply (no RA,
// no OPT), Authoritative, NOERROR.
func local(records ...string) answer { return answer{aa: true, records: records} }

// relayed is a relayed answer of the test upstream (see helpers_test.go): one A record
// 10.9.9.9 for A questions, nothing for other types, NXDOMAIN for "nx.*"; it echoes an OPT
// when the query had one. Istio relays it as is (queryUpstream, then Truncate, which keeps
// a reply that fits unchanged).
func relayed(name string, qtype uint16, edns uint16) answer {
	a := answer{forwarded: true, opt: edns > 0}
	if strings.HasPrefix(name, "nx.") {
		a.rcode = mdns.RcodeNameError
	} else if qtype == mdns.TypeA {
		a.records = []string{name + " A " + upstreamIP}
	}
	return a
}

const (
	whyExact    = "lookupHost: exact name in allHosts; name4/name6 built by buildDNSAnswers"
	whyAlt      = "GenerateAltHosts: short.ns., short. (own namespace), short.ns.svc. for Kubernetes hosts in the proxy domain"
	whyEmpty    = "ServeDNS: hostFound with no record of the family -> NOERROR, empty answer (istio#31250)"
	whySearch   = "buildDNSAnswers: <name>.<first search domain>. is a CNAME to <name>.; lookupHost chains CNAME then the target's records"
	whyForward  = "lookupHost returns hostFound=false -> ServeDNS calls upstream (queryUpstream, one Exchange on the client's transport)"
	whyWildcard = "lookupHost: no exact name, nearest *.suffix. in allHosts; records copied with the question as owner"
)

func parityCases() []parityCase {
	A, AAAA := mdns.TypeA, mdns.TypeAAAA
	return []parityCase{
		{name: "productpage.ns1.svc.cluster.local.", qtype: A, istio: local("productpage.ns1.svc.cluster.local. A 10.0.0.1"), why: whyExact},
		{name: "productpage.", qtype: A, istio: local("productpage. A 10.0.0.1"), why: whyAlt},
		{name: "productpage.ns1.", qtype: A, istio: local("productpage.ns1. A 10.0.0.1"), why: whyAlt},
		{name: "productpage.ns1.svc.", qtype: A, istio: local("productpage.ns1.svc. A 10.0.0.1"), why: whyAlt},
		{name: "productpage.ns1.svc.cluster.", qtype: A, istio: relayed("productpage.ns1.svc.cluster.", A, 0),
			why: "GenerateAltHosts adds only the first domain label (svc); other forms are forwarded"},
		{name: "productpage.ns1.svc.cluster.local.", qtype: AAAA, istio: local(), why: whyEmpty},
		{name: "reviews.", qtype: A, istio: relayed("reviews.", A, 0),
			why: "GenerateAltHosts: a bare short name only for the proxy's own namespace"},
		{name: "reviews.ns2.", qtype: A, istio: local("reviews.ns2. A 10.0.0.2"), why: whyAlt},
		{name: "reviews.ns2.", qtype: AAAA, istio: local("reviews.ns2. AAAA 2001:db8::2"), why: whyAlt},
		{name: "reviews.ns2.svc.cluster.local.", qtype: AAAA, istio: local("reviews.ns2.svc.cluster.local. AAAA 2001:db8::2"), why: whyExact},
		{name: "details.alias.example.org.", qtype: A, istio: local("details.alias.example.org. A 10.0.0.3"),
			why: "GenerateAltHosts: alt_hosts of a Kubernetes entry in the proxy domain"},
		{name: "headless.ns1.svc.cluster.local.", qtype: A,
			istio: local("headless.ns1.svc.cluster.local. A 10.1.0.1", "headless.ns1.svc.cluster.local. A 10.1.0.2",
				"headless.ns1.svc.cluster.local. A 10.1.0.3"),
			why: "buildDNSAnswers: one A per IP; roundRobinResponse shuffles their order (compared as a set)"},
		{name: "headless.", qtype: A,
			istio: local("headless. A 10.1.0.1", "headless. A 10.1.0.2", "headless. A 10.1.0.3"), why: whyAlt},
		{name: "ratings.ns3.svc.remote.local.", qtype: A, istio: local("ratings.ns3.svc.remote.local. A 10.3.0.1"), why: whyExact},
		{name: "ratings.ns3.", qtype: A, istio: relayed("ratings.ns3.", A, 0),
			why: "GenerateAltHosts: no alt names for a host outside the proxy domain"},
		// The search-domain shortcut.
		{name: "reviews.ns2.ns1.svc.cluster.local.", qtype: A,
			istio: local("reviews.ns2.ns1.svc.cluster.local. CNAME reviews.ns2.", "reviews.ns2. A 10.0.0.2"), why: whySearch},
		{name: "reviews.ns2.svc.cluster.local.ns1.svc.cluster.local.", qtype: AAAA,
			istio: local("reviews.ns2.svc.cluster.local.ns1.svc.cluster.local. CNAME reviews.ns2.svc.cluster.local.",
				"reviews.ns2.svc.cluster.local. AAAA 2001:db8::2"), why: whySearch},
		{name: "productpage.ns1.ns1.svc.cluster.local.", qtype: A,
			istio: local("productpage.ns1.ns1.svc.cluster.local. CNAME productpage.ns1.", "productpage.ns1. A 10.0.0.1"), why: whySearch},
		{name: "www.google.com.ns1.svc.cluster.local.", qtype: A,
			istio: local("www.google.com.ns1.svc.cluster.local. CNAME www.google.com.", "www.google.com. A 1.1.1.1"), why: whySearch},
		{name: "www.google.com.ns1.svc.cluster.local.", qtype: AAAA, istio: local(),
			why: "lookupHost: the CNAME is returned only together with records of the family (ipAnswers empty -> no answer)"},
		{name: "www.google.com.svc.cluster.local.", qtype: A, istio: relayed("www.google.com.svc.cluster.local.", A, 0),
			why: "buildDNSAnswers expands only the first search domain"},
		{name: "www.google.com.", qtype: A, istio: local("www.google.com. A 1.1.1.1"), why: whyExact},
		// Wildcards.
		{name: "a.wild.com.", qtype: A, istio: local("a.wild.com. A 2.2.2.2"), why: whyWildcard},
		{name: "x.y.wild.com.", qtype: A, istio: local("x.y.wild.com. A 2.2.2.2"), why: whyWildcard},
		{name: "wild.com.", qtype: A, istio: relayed("wild.com.", A, 0),
			why: "lookupHost probes *.<parent labels>. only: a wildcard never matches its base name"},
		{name: "a.wild.com.ns1.svc.cluster.local.", qtype: A,
			istio: local("a.wild.com.ns1.svc.cluster.local. CNAME *.wild.com.", "*.wild.com. A 2.2.2.2"),
			why:   "lookupHost: wildcard match on the expanded *.wild.com.<search>. CNAME; with a CNAME the records keep the literal *.wild.com. owner",
			ours:  &answer{aa: true, ra: true, records: []string{"a.wild.com.ns1.svc.cluster.local. CNAME a.wild.com.", "a.wild.com. A 2.2.2.2"}},
			diff:  "P3"},
		// IPv6.
		{name: "v6only.example.com.", qtype: A, istio: local(), why: whyEmpty},
		{name: "v6only.example.com.", qtype: AAAA, istio: local("v6only.example.com. AAAA 2001:db8::6"), why: whyExact},
		{name: "db.mesh.internal.", qtype: A, istio: local("db.mesh.internal. A 10.2.0.1", "db.mesh.internal. A 10.2.0.2"),
			why: "ParseIPsSplitToV4V6: netip Is4 -> A"},
		{name: "db.mesh.internal.", qtype: AAAA, istio: local("db.mesh.internal. AAAA ::ffff:10.2.0.3"),
			why: "ParseIPsSplitToV4V6: an IPv4-mapped address is Is6 -> AAAA"},
		// Not answered from the table.
		{name: "bad.example.com.", qtype: A, istio: relayed("bad.example.com.", A, 0),
			why: "BuildAlternateHosts skips an entry without a parseable IP"},
		{name: "example.org.", qtype: A, istio: relayed("example.org.", A, 0), why: whyForward},
		{name: "nx.example.org.", qtype: A, istio: relayed("nx.example.org.", A, 0), why: whyForward},
		{name: "productpage.ns1.svc.cluster.local.", qtype: mdns.TypeTXT, istio: relayed("productpage.ns1.svc.cluster.local.", mdns.TypeTXT, 0),
			why: "lookupHost: types other than A/AAAA return hostFound=false -> forwarded"},
		{name: "productpage.", qtype: mdns.TypeANY, istio: relayed("productpage.", mdns.TypeANY, 0),
			why: "lookupHost: types other than A/AAAA return hostFound=false -> forwarded"},
		{name: ".", qtype: A, istio: local(". A 10.6.0.1"),
			why:  "GenerateAltHosts inserts Shortname+\".\" for an entry of the own namespace even when the short name is empty: the root",
			ours: func() *answer { a := relayed(".", A, 0); return &a }(), diff: "P11"},
		{name: "noshort.ns1.svc.cluster.local.", qtype: A, istio: local("noshort.ns1.svc.cluster.local. A 10.6.0.1"), why: whyExact},
		{name: "dup.mesh.internal.", qtype: A, istio: local("dup.mesh.internal. A 10.5.0.1", "dup.mesh.internal. A 10.5.0.1"),
			why:  "buildDNSAnswers: one record per IP string, duplicates included",
			ours: &answer{aa: true, ra: true, records: []string{"dup.mesh.internal. A 10.5.0.1"}}, diff: "P4"},
		// Header and EDNS corner cases.
		{name: "productpage.", qtype: A, edns: 1232, mutate: func(m *mdns.Msg) { m.IsEdns0().SetVersion(1) },
			istio: local("productpage. A 10.0.0.1"), why: "ServeDNS does not look at the EDNS version",
			ours: &answer{rcode: mdns.RcodeBadVers, ra: true, opt: true}, diff: "P7"},
		{name: "productpage.", qtype: A, edns: 1232, mutate: func(m *mdns.Msg) { m.Extra = append(m.Extra, m.Extra[0]) },
			istio: local("productpage. A 10.0.0.1"), why: "miekg/dns unpacks a second OPT; ServeDNS answers",
			ours: &answer{rcode: mdns.RcodeFormatError, ra: true, opt: true}, diff: "P8"},
		{name: "productpage.", qtype: A, mutate: func(m *mdns.Msg) { m.Opcode = mdns.OpcodeNotify },
			istio: local("productpage. A 10.0.0.1"), why: "miekg/dns defaultMsgAcceptFunc accepts NOTIFY; ServeDNS answers it like a query",
			ours: &answer{rcode: mdns.RcodeNotImplemented, ra: true}, diff: "P9"},
		{name: "productpage.", qtype: A, mutate: func(m *mdns.Msg) { m.Opcode = mdns.OpcodeStatus },
			istio: answer{rcode: mdns.RcodeNotImplemented},
			why:   "miekg/dns defaultMsgAcceptFunc: MsgRejectNotImplemented, a header-only NOTIMP reply"},
		// Letter case: Istio looks the lower-cased name up and answers with lower-cased owners;
		// we keep the client's case in every name we write (global rule P2).
		{name: "PrOdUcTpAgE.Ns1.svc.CLUSTER.local.", qtype: A, istio: local("productpage.ns1.svc.cluster.local. A 10.0.0.1"),
			why: "ServeDNS lower-cases the question name; lookupHost answers with stored (lower-case) owners"},
		{name: "WWW.Google.COM.ns1.svc.cluster.local.", qtype: A,
			istio: local("www.google.com.ns1.svc.cluster.local. CNAME www.google.com.", "www.google.com. A 1.1.1.1"), why: whySearch},
		{name: "A.Wild.Com.", qtype: A, istio: local("a.wild.com. A 2.2.2.2"), why: whyWildcard},
		{name: "Example.ORG.", qtype: A, istio: relayed("Example.ORG.", A, 0),
			why: "queryUpstream sends the question as received"},
		// EDNS: Istio's table answers carry no OPT (SetReply does not copy it); forwarded
		// replies are the upstream's, OPT included.
		{name: "productpage.", qtype: A, edns: 1232, istio: local("productpage. A 10.0.0.1"), why: whyAlt},
		{name: "headless.ns1.svc.cluster.local.", qtype: A, edns: 4096,
			istio: local("headless.ns1.svc.cluster.local. A 10.1.0.1", "headless.ns1.svc.cluster.local. A 10.1.0.2",
				"headless.ns1.svc.cluster.local. A 10.1.0.3"), why: whyExact},
		{name: "example.org.", qtype: A, edns: 1232, istio: relayed("example.org.", A, 1232), why: whyForward},
		// A class other than IN: Istio's lookupHost ignores the class and answers IN records.
		{name: "productpage.", qtype: A, qclass: mdns.ClassCHAOS, istio: local("productpage. A 10.0.0.1"),
			why:  "lookupHost is keyed on name and type only",
			ours: func() *answer { a := relayed("productpage.", A, 0); return &a }(), diff: "P5"},
	}
}

// ourAnswer is Istio's answer with the differences every table answer has (PARITY.md P1, P2,
// P6): an OPT when the query had one, RA set, and owner names in the client's letter case
// (checked separately by caseKept).
func ourAnswer(c parityCase) answer {
	if c.ours != nil {
		return *c.ours
	}
	a := c.istio
	if !a.forwarded {
		a.ra = true        // P6
		a.opt = c.edns > 0 // P1
		a.records = slices.Clone(a.records)
	}
	return a
}

func TestParityWithIstio(t *testing.T) {
	up := startUpstream(t, "127.0.0.1")
	s := newTestServer(t, Config{}, up.addr)
	if err := s.UpdateNameTable(marshalTable(t, parityTable())); err != nil {
		t.Fatal(err)
	}
	addr := run(t, s)
	for _, network := range []string{"udp", "tcp"} {
		for _, c := range parityCases() {
			t.Run(network+"/"+c.name+"/"+mdns.TypeToString[c.qtype], func(t *testing.T) {
				want := ourAnswer(c)
				before := len(up.transports())
				r := askParity(t, network, addr, c)
				got := answer{
					forwarded: len(up.transports()) > before,
					rcode:     r.Rcode, aa: r.Authoritative, ra: r.RecursionAvailable, opt: r.IsEdns0() != nil,
					records: normalize(answers(r), true),
				}
				if n := len(up.transports()) - before; n > 1 {
					t.Fatalf("%d upstream queries for one client query, want at most 1", n)
				}
				want.records = normalize(want.records, true)
				if !equalAnswer(got, want) {
					t.Fatalf("got  %+v\nwant %+v\nIstio: %s%s", got, want, c.why, diffNote(c))
				}
				if c.ours == nil && !got.forwarded && !caseKept(c.name, r) {
					t.Fatalf("owner names %q do not keep the client's letter case (PARITY.md P2)", answers(r))
				}
			})
		}
	}
}

func diffNote(c parityCase) string {
	if c.diff == "" {
		return ""
	}
	return "; we differ on purpose: PARITY.md " + c.diff
}

func askParity(t *testing.T, network, addr string, c parityCase) *mdns.Msg {
	t.Helper()
	m := new(mdns.Msg)
	m.SetQuestion(c.name, c.qtype)
	if c.qclass != 0 {
		m.Question[0].Qclass = c.qclass
	}
	if c.edns > 0 {
		m.SetEdns0(c.edns, false)
	}
	if c.mutate != nil {
		c.mutate(m)
	}
	cl := &mdns.Client{Net: network}
	r, _, err := cl.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s query: %v", network, err)
	}
	if len(r.Question) == 0 { // a header-only reply (NOTIMP)
		return r
	}
	if r.Question[0].Name != c.name {
		t.Fatalf("question echoed as %q, sent %q", r.Question[0].Name, c.name)
	}
	return r
}

// normalize lower-cases owners and targets when fold is set (letter case is checked by
// caseKept), keeps CNAMEs first in order and sorts the rest (DNS round robin shuffles them).
func normalize(recs []string, fold bool) []string {
	var cn, rest []string
	for _, r := range recs {
		if fold {
			r = strings.ToLower(r)
		}
		if strings.Contains(r, " CNAME ") || strings.Contains(r, " cname ") {
			cn = append(cn, r)
		} else {
			rest = append(rest, r)
		}
	}
	slices.Sort(rest)
	return append(cn, rest...)
}

func equalAnswer(a, b answer) bool {
	return a.forwarded == b.forwarded && a.rcode == b.rcode && a.aa == b.aa && a.ra == b.ra &&
		a.opt == b.opt && slices.Equal(a.records, b.records)
}

// caseKept reports whether every owner and CNAME target in r is written with the letters
// the client used in its question.
func caseKept(qname string, r *mdns.Msg) bool {
	for _, rr := range r.Answer {
		names := []string{rr.Header().Name}
		if c, ok := rr.(*mdns.CNAME); ok {
			names = append(names, c.Target)
		}
		for _, n := range names {
			if !strings.Contains(qname, n) {
				return false
			}
		}
	}
	return true
}

// TestParityDocListsEveryDifference: every difference the comparison relies on has its
// entry, with an RFC, in PARITY.md.
func TestParityDocListsEveryDifference(t *testing.T) {
	doc, err := os.ReadFile("PARITY.md")
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"P1", "P2", "P6"} // the global rules of ourAnswer
	for _, c := range parityCases() {
		if c.ours != nil {
			if c.diff == "" {
				t.Errorf("%s: differs from Istio without a PARITY.md entry", c.name)
			}
			ids = append(ids, c.diff)
		}
	}
	for _, id := range ids {
		i := strings.Index(string(doc), "## "+id+" ")
		if i < 0 {
			t.Errorf("PARITY.md has no entry %q", id)
			continue
		}
		entry := string(doc[i:])
		if j := strings.Index(entry[3:], "\n## "); j >= 0 {
			entry = entry[:j+3]
		}
		if !strings.Contains(entry, "RFC ") {
			t.Errorf("PARITY.md entry %s names no RFC", id)
		}
	}
}

// TestParityUpstreamQuestion: an upstream reply with the query's ID but another question.
// Istio relays it (miekg/dns Client.Exchange matches the ID only); we treat it as a failed
// exchange and answer SERVFAIL (PARITY.md P10, RFC 5452).
func TestParityUpstreamQuestion(t *testing.T) {
	other := func(req []byte) []byte {
		r := append([]byte(nil), req...)
		r[2] |= 0x80
		r[headerLen+3] ^= 0x03 // "example" -> "exbmple": another name, same length
		return r
	}
	up, got := blackhole(t, other)
	s := newTestServer(t, Config{}, up)
	if err := s.UpdateNameTable(marshalTable(t, parityTable())); err != nil {
		t.Fatal(err)
	}
	addr := run(t, s)
	r := ask(t, "udp", addr, "example.org.", mdns.TypeA, 0)
	<-got
	if r.Rcode != mdns.RcodeServerFailure || r.Question[0].Name != "example.org." {
		t.Fatalf("got %v, want SERVFAIL for example.org. (Istio would relay the reply for exbmple.org.)", r)
	}
	doc, err := os.ReadFile("PARITY.md")
	if err != nil || !strings.Contains(string(doc), "## P10 ") {
		t.Fatalf("PARITY.md has no P10 entry (%v)", err)
	}
}

// TestParityCompressibleUpstreamReply: an upstream reply written without name compression
// that is over 512 bytes but fits once compressed. Istio's ServeDNS passes it through
// miekg/dns Msg.Truncate, which compresses it and keeps every record without TC; so do we.
func TestParityCompressibleUpstreamReply(t *testing.T) {
	const n = 29 // 29 A records: 841 bytes uncompressed, 495 compressed
	reply := func(req []byte) []byte {
		q := new(mdns.Msg)
		if err := q.Unpack(req); err != nil {
			return nil
		}
		m := new(mdns.Msg)
		m.SetReply(q)
		for i := range n {
			rr, _ := mdns.NewRR(fmt.Sprintf("%s 60 IN A 10.7.0.%d", q.Question[0].Name, i+1))
			m.Answer = append(m.Answer, rr)
		}
		m.Compress = false
		b, _ := m.Pack()
		return b
	}
	up, _ := blackhole(t, reply)
	s := newTestServer(t, Config{}, up)
	if err := s.UpdateNameTable(marshalTable(t, parityTable())); err != nil {
		t.Fatal(err)
	}
	addr := run(t, s)
	raw := askRaw(t, addr, pack(t, "x.example.org.", mdns.TypeA, 0))
	r := new(mdns.Msg)
	if err := r.Unpack(raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) > minUDPSize || r.Truncated || len(r.Answer) != n {
		t.Fatalf("%d bytes, TC %v, %d records; want all %d records within 512 bytes, no TC", len(raw), r.Truncated, len(r.Answer), n)
	}
}
