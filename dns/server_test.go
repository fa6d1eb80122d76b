package dns

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/internal/ndspb"
)

func TestResolution(t *testing.T) {
	_, addr, _ := startLoaded(t, Config{})
	fromUpstream := func(name string) []string { return []string{name + " A " + upstreamIP} }
	cases := []struct {
		name   string
		qtype  uint16
		rcode  int
		auth   bool // answered from the table
		answer []string
	}{
		{"productpage.ns1.svc.cluster.local.", mdns.TypeA, 0, true, []string{"productpage.ns1.svc.cluster.local. A 10.0.0.1"}},
		{"productpage.", mdns.TypeA, 0, true, []string{"productpage. A 10.0.0.1"}},
		{"productpage.ns1.", mdns.TypeA, 0, true, []string{"productpage.ns1. A 10.0.0.1"}},
		{"productpage.ns1.svc.", mdns.TypeA, 0, true, []string{"productpage.ns1.svc. A 10.0.0.1"}},
		// Short names exist only for the proxy's own namespace.
		{"reviews.", mdns.TypeA, 0, false, fromUpstream("reviews.")},
		{"reviews.ns2.", mdns.TypeA, 0, true, []string{"reviews.ns2. A 10.0.0.2"}},
		{"reviews.ns2.", mdns.TypeAAAA, 0, true, []string{"reviews.ns2. AAAA 2001:db8::2"}},
		// A known host without the asked family: NOERROR, no records (istio#31250).
		{"productpage.ns1.svc.cluster.local.", mdns.TypeAAAA, 0, true, nil},
		{"v6only.example.com.", mdns.TypeA, 0, true, nil},
		{"v6only.example.com.", mdns.TypeAAAA, 0, true, []string{"v6only.example.com. AAAA 2001:db8::6"}},
		// The first search domain gets a CNAME shortcut to the name without it.
		{"www.google.com.ns1.svc.cluster.local.", mdns.TypeA, 0, true, []string{
			"www.google.com.ns1.svc.cluster.local. CNAME www.google.com.", "www.google.com. A 1.1.1.1"}},
		{"reviews.ns2.ns1.svc.cluster.local.", mdns.TypeAAAA, 0, true, []string{
			"reviews.ns2.ns1.svc.cluster.local. CNAME reviews.ns2.", "reviews.ns2. AAAA 2001:db8::2"}},
		// A shortcut to a host without the family is empty, not a dangling CNAME.
		{"www.google.com.ns1.svc.cluster.local.", mdns.TypeAAAA, 0, true, nil},
		// Only the first search domain is shortcut; the others go upstream.
		{"www.google.com.svc.cluster.local.", mdns.TypeA, 0, false, fromUpstream("www.google.com.svc.cluster.local.")},
		// Wildcards match any depth below them, answered under the asked name.
		{"a.wild.com.", mdns.TypeA, 0, true, []string{"a.wild.com. A 2.2.2.2"}},
		{"b.a.wild.com.", mdns.TypeA, 0, true, []string{"b.a.wild.com. A 2.2.2.2"}},
		{"wild.com.", mdns.TypeA, 0, false, fromUpstream("wild.com.")},
		{"a.wild.com.ns1.svc.cluster.local.", mdns.TypeA, 0, true, []string{
			"a.wild.com.ns1.svc.cluster.local. CNAME a.wild.com.", "a.wild.com. A 2.2.2.2"}},
		// Entries without a usable IP are skipped; other types and unknown names go upstream.
		{"bad.example.com.", mdns.TypeA, 0, false, fromUpstream("bad.example.com.")},
		{"productpage.ns1.svc.cluster.local.", mdns.TypeMX, 0, false, nil},
		{"nx.example.org.", mdns.TypeA, mdns.RcodeNameError, false, nil},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, c := range cases {
			t.Run(network+"/"+c.name+"/"+mdns.TypeToString[c.qtype], func(t *testing.T) {
				r := ask(t, network, addr, c.name, c.qtype, 0)
				if r.Rcode != c.rcode || r.Authoritative != c.auth {
					t.Fatalf("rcode %s aa %v, want %s aa %v", mdns.RcodeToString[r.Rcode], r.Authoritative,
						mdns.RcodeToString[c.rcode], c.auth)
				}
				if got := answers(r); !slices.Equal(got, c.answer) {
					t.Fatalf("answers %q, want %q", got, c.answer)
				}
				if c.auth && len(r.Answer) > 0 && r.Answer[len(r.Answer)-1].Header().Ttl != ttlSeconds {
					t.Fatalf("TTL %d, want %d", r.Answer[0].Header().Ttl, ttlSeconds)
				}
			})
		}
	}
}

func TestLetterCaseIsEchoed(t *testing.T) {
	_, addr, _ := startLoaded(t, Config{})
	for _, name := range []string{"PrOdUcTpAgE.Ns1.SVC.cluster.local.", "WWW.google.COM.ns1.Svc.cluster.local."} {
		r := ask(t, "udp", addr, name, mdns.TypeA, 0)
		if r.Question[0].Name != name || !r.Authoritative || r.Answer[0].Header().Name != name {
			t.Fatalf("%s: question %q, answer %v", name, r.Question[0].Name, r.Answer)
		}
	}
}

func TestEDNS(t *testing.T) {
	_, addr, _ := startLoaded(t, Config{})
	r := ask(t, "udp", addr, "productpage.", mdns.TypeA, 1232)
	if o := r.IsEdns0(); o == nil || o.UDPSize() != maxUDPSize {
		t.Fatalf("reply OPT %v, want one advertising %d", r.IsEdns0(), maxUDPSize)
	}
	// An EDNS version we do not speak gets BADVERS.
	m := new(mdns.Msg)
	m.SetQuestion("productpage.", mdns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	raw, _ := m.Pack()
	rep := new(mdns.Msg)
	if err := rep.Unpack(askRaw(t, addr, raw)); err != nil {
		t.Fatal(err)
	}
	if rep.Rcode != mdns.RcodeBadVers {
		t.Fatalf("rcode %s, want BADVERS", mdns.RcodeToString[rep.Rcode])
	}
}

func TestTruncation(t *testing.T) {
	_, addr, up := startLoaded(t, Config{})
	for _, c := range []struct {
		name string
		want int // records in the full answer
	}{{"headless.ns1.svc.cluster.local.", 100}, {"big.example.org.", 100}} {
		t.Run(c.name, func(t *testing.T) {
			for _, edns := range []uint16{0, 600, 1232} {
				limit := max(int(edns), minUDPSize)
				raw := askRaw(t, addr, pack(t, c.name, mdns.TypeA, edns))
				if len(raw) > limit {
					t.Fatalf("edns %d: UDP answer of %d bytes, client allows %d", edns, len(raw), limit)
				}
				r := new(mdns.Msg)
				if err := r.Unpack(raw); err != nil {
					t.Fatalf("edns %d: truncated answer does not parse: %v", edns, err)
				}
				if !r.Truncated || len(r.Answer) == 0 || len(r.Answer) >= c.want {
					t.Fatalf("edns %d: TC %v with %d records, want TC with a partial answer", edns, r.Truncated, len(r.Answer))
				}
			}
			// A large enough EDNS size gets everything over UDP; TCP always does.
			if r := ask(t, "udp", addr, c.name, mdns.TypeA, 4096); r.Truncated || len(r.Answer) != c.want {
				t.Fatalf("udp edns 4096: TC %v, %d records", r.Truncated, len(r.Answer))
			}
			if r := ask(t, "tcp", addr, c.name, mdns.TypeA, 0); r.Truncated || len(r.Answer) != c.want {
				t.Fatalf("tcp: TC %v, %d records", r.Truncated, len(r.Answer))
			}
		})
	}
	// The upstream's truncated UDP reply is relayed as it came, TC set, after exactly one
	// upstream query over UDP, as Istio's queryUpstream (miekg/dns Client.Exchange over the
	// client's transport, which does not retry over TCP); the client's own TCP retry is
	// forwarded over TCP, once.
	before := len(up.transports())
	r := new(mdns.Msg)
	if err := r.Unpack(askRaw(t, addr, pack(t, "big.example.org.", mdns.TypeA, 0))); err != nil || !r.Truncated {
		t.Fatalf("relayed reply: TC %v, err %v", r.Truncated, err)
	}
	if nets := up.transports()[before:]; !slices.Equal(nets, []string{"udp"}) {
		t.Fatalf("upstream saw %v for one UDP query, want [udp]", nets)
	}
	ask(t, "tcp", addr, "big.example.org.", mdns.TypeA, 0)
	if nets := up.transports()[before:]; !slices.Equal(nets, []string{"udp", "tcp"}) {
		t.Fatalf("upstream saw %v after the TCP retry, want [udp tcp]", nets)
	}
}

func TestRoundRobin(t *testing.T) {
	_, addr, _ := startLoaded(t, Config{})
	firsts := map[string]bool{}
	for range 20 {
		r := ask(t, "tcp", addr, "headless.ns1.svc.cluster.local.", mdns.TypeA, 0)
		if len(r.Answer) != 100 {
			t.Fatalf("%d records", len(r.Answer))
		}
		firsts[r.Answer[0].(*mdns.A).A.String()] = true
	}
	if len(firsts) < 2 {
		t.Fatalf("20 answers all started with %v: not shuffled", firsts)
	}
}

func TestUpstreamFailures(t *testing.T) {
	garbage := func(req []byte) []byte { // right ID and QR bit, then junk
		return append([]byte{req[0], req[1], 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0}, "\x05junk"...)
	}
	wrongID := func(req []byte) []byte {
		r := append([]byte(nil), req...)
		r[0]++
		r[2] |= 0x80
		return r
	}
	for _, c := range []struct {
		name   string
		server func(t *testing.T) []netip.AddrPort
	}{
		{"down", func(t *testing.T) []netip.AddrPort { return []netip.AddrPort{closedPort(t)} }},
		{"silent", func(t *testing.T) []netip.AddrPort { a, _ := blackhole(t, nil); return []netip.AddrPort{a} }},
		{"garbage", func(t *testing.T) []netip.AddrPort { a, _ := blackhole(t, garbage); return []netip.AddrPort{a} }},
		{"spoofed-id", func(t *testing.T) []netip.AddrPort { a, _ := blackhole(t, wrongID); return []netip.AddrPort{a} }},
		{"none", func(t *testing.T) []netip.AddrPort { return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := metric.NewRegistry()
			s := newTestServer(t, Config{ForwardTimeout: 300 * time.Millisecond, Registerer: reg}, c.server(t)...)
			if err := s.UpdateNameTable(marshalTable(t, testTable())); err != nil {
				t.Fatal(err)
			}
			addr := run(t, s)
			for _, network := range []string{"udp", "tcp"} {
				if r := ask(t, network, addr, "example.org.", mdns.TypeA, 0); r.Rcode != mdns.RcodeServerFailure {
					t.Fatalf("%s: rcode %s, want SERVFAIL", network, mdns.RcodeToString[r.Rcode])
				}
			}
			// Table answers do not depend on the upstream.
			if r := ask(t, "udp", addr, "productpage.", mdns.TypeA, 0); r.Rcode != 0 || len(r.Answer) != 1 {
				t.Fatalf("table answer with upstream %s: %v", c.name, r)
			}
			if got := counter(t, reg, "istio_agent_dns_upstream_failures_total"); got != 2 {
				t.Fatalf("upstream failures %v, want 2", got)
			}
		})
	}
}

func TestForwardParallel(t *testing.T) {
	up := startUpstream(t, "127.0.0.1")
	silent, _ := blackhole(t, nil)
	s := newTestServer(t, Config{ForwardParallel: true, ForwardTimeout: 30 * time.Second}, silent, up.addr)
	if err := s.UpdateNameTable(marshalTable(t, testTable())); err != nil {
		t.Fatal(err)
	}
	addr := run(t, s)
	// With a 30 s timeout, only parallel forwarding answers within the client's 5 s.
	for range 5 {
		if r := ask(t, "udp", addr, "example.org.", mdns.TypeA, 0); r.Rcode != 0 || len(r.Answer) != 1 {
			t.Fatalf("parallel forward: %v", r)
		}
	}
}

// TestSequentialRelaysServfail: a SERVFAIL from the upstream asked is relayed, as Istio's
// queryUpstream does (it moves to the next server only on an Exchange error). Each query
// goes to one server, chosen at random; over many queries both answers are seen, and
// every query reaches exactly one upstream.
func TestSequentialRelaysServfail(t *testing.T) {
	up := startUpstream(t, "127.0.0.1")
	servfail := func(req []byte) []byte {
		r := append([]byte(nil), req...)
		r[2], r[3] = r[2]|0x80, r[3]&0xF0|rcodeServFail
		return r
	}
	bad, badGot := blackhole(t, servfail)
	s := newTestServer(t, Config{}, bad, up.addr)
	if err := s.UpdateNameTable(marshalTable(t, testTable())); err != nil {
		t.Fatal(err)
	}
	addr := run(t, s)
	seen := map[int]int{}
	const n = 40
	for range n {
		r := ask(t, "udp", addr, "example.org.", mdns.TypeA, 0)
		seen[r.Rcode]++
		if r.Rcode == mdns.RcodeServerFailure {
			<-badGot
		}
	}
	if seen[mdns.RcodeServerFailure] == 0 || seen[mdns.RcodeSuccess] == 0 || len(seen) != 2 {
		t.Fatalf("rcodes over %d queries: %v, want both SERVFAIL (relayed) and NOERROR", n, seen)
	}
	if got := len(up.transports()); got != seen[mdns.RcodeSuccess] {
		t.Fatalf("good upstream asked %d times for %d NOERROR answers: a SERVFAIL was retried", got, seen[mdns.RcodeSuccess])
	}
}

func TestForwardBound(t *testing.T) {
	silent, got := blackhole(t, nil)
	// The forward timeout outlasts any delay of a loaded machine: the first query holds the
	// slot until then, so the second is answered while the first is out only if it did not wait.
	s := newTestServer(t, Config{MaxConcurrentForwards: 1, ForwardTimeout: 10 * time.Second}, silent)
	if err := s.UpdateNameTable(marshalTable(t, testTable())); err != nil {
		t.Fatal(err)
	}
	addr := run(t, s)
	first := make(chan *mdns.Msg, 1)
	go func() {
		c := &mdns.Client{Net: "udp", Timeout: 30 * time.Second}
		m := new(mdns.Msg)
		m.SetQuestion("first.example.org.", mdns.TypeA)
		r, _, _ := c.Exchange(m, addr)
		first <- r
	}()
	select {
	case <-got: // the first query holds the only slot
	case <-time.After(5 * time.Second):
		t.Fatal("first query never reached the upstream")
	}
	if r := ask(t, "udp", addr, "second.example.org.", mdns.TypeA, 0); r.Rcode != mdns.RcodeServerFailure {
		t.Fatalf("over the bound: rcode %s, want SERVFAIL", mdns.RcodeToString[r.Rcode])
	}
	select {
	case <-first:
		t.Fatal("a query over the bound was answered only after the first had ended: it waited for the slot")
	default:
	}
	if r := <-first; r == nil || r.Rcode != mdns.RcodeServerFailure {
		t.Fatalf("first query: %v, want SERVFAIL after the timeout", r)
	}
}

func TestNameTableLifecycle(t *testing.T) {
	up := startUpstream(t, "127.0.0.1")
	s := newTestServer(t, Config{}, up.addr)
	addr := run(t, s)
	if s.Ready() {
		t.Fatal("ready before any NameTable")
	}
	if r := ask(t, "udp", addr, "example.org.", mdns.TypeA, 0); r.Rcode != mdns.RcodeServerFailure {
		t.Fatalf("before the table: rcode %s, want SERVFAIL", mdns.RcodeToString[r.Rcode])
	}
	if err := s.UpdateNameTable(marshalTable(t, testTable())); err != nil {
		t.Fatal(err)
	}
	if !s.Ready() {
		t.Fatal("not ready after a NameTable")
	}
	// A malformed table is refused and the last good one keeps answering.
	good := marshalTable(t, testTable())
	for _, bad := range [][]byte{{0xff, 0xff, 0xff}, good[:len(good)-3], {0x0a, 0x05, 0x0a}} {
		if err := s.UpdateNameTable(bad); err == nil {
			t.Fatalf("malformed table %x accepted", bad)
		}
	}
	if r := ask(t, "udp", addr, "productpage.", mdns.TypeA, 0); len(r.Answer) != 1 {
		t.Fatalf("after a malformed table: %v", r)
	}
	// Unknown fields (a newer Istiod) are tolerated: field 15 appended to an entry.
	withUnknown := append(marshalTable(t, map[string]*ndspb.NameTable_NameInfo{
		"new.example.com": external("3.3.3.3")}), 0x7a, 0x01, 'x')
	if err := s.UpdateNameTable(withUnknown); err != nil {
		t.Fatalf("table with an unknown field: %v", err)
	}
	if r := ask(t, "udp", addr, "new.example.com.", mdns.TypeA, 0); len(r.Answer) != 1 || !r.Authoritative {
		t.Fatalf("new table not in use: %v", r)
	}
	if r := ask(t, "udp", addr, "productpage.", mdns.TypeA, 0); r.Authoritative {
		t.Fatalf("old name still answered from the table: %v", r)
	}
}

func TestRespondBeforeSync(t *testing.T) {
	up := startUpstream(t, "127.0.0.1")
	s := newTestServer(t, Config{RespondBeforeSync: true}, up.addr)
	addr := run(t, s)
	if r := ask(t, "udp", addr, "example.org.", mdns.TypeA, 0); r.Rcode != 0 || len(r.Answer) != 1 {
		t.Fatalf("before the table with RespondBeforeSync: %v", r)
	}
}

func TestMalformedQueries(t *testing.T) {
	_, addr, _ := startLoaded(t, Config{})
	hdr := func(flags uint16, qd uint16) []byte {
		b := make([]byte, headerLen)
		putHeader(b, 0x1234, flags, qd, 0, 0, 0)
		return b
	}
	for _, c := range []struct {
		name  string
		pkt   []byte
		rcode int
	}{
		{"no question", hdr(0, 0), mdns.RcodeFormatError},
		{"two questions", append(hdr(0, 2), pack(t, "a.", 1, 0)[12:]...), mdns.RcodeFormatError},
		{"cut question", append(hdr(0, 1), 3, 'a', 'b'), mdns.RcodeFormatError},
		{"pointer in question", append(hdr(0, 1), 0xC0, 12, 0, 1, 0, 1), mdns.RcodeFormatError},
		{"update opcode", append(hdr(5<<11, 1), pack(t, "a.", 1, 0)[12:]...), mdns.RcodeNotImplemented},
	} {
		r := new(mdns.Msg)
		if err := r.Unpack(askRaw(t, addr, c.pkt)); err != nil {
			t.Fatalf("%s: reply does not parse: %v", c.name, err)
		}
		if r.Id != 0x1234 || r.Rcode != c.rcode {
			t.Fatalf("%s: id %#x rcode %s, want %s", c.name, r.Id, mdns.RcodeToString[r.Rcode], mdns.RcodeToString[c.rcode])
		}
	}
}

func TestIPv6Listener(t *testing.T) {
	up4 := startUpstream(t, "127.0.0.1")
	up6 := startUpstream(t, "::1") // skips without IPv6 loopback
	s := newTestServer(t, Config{Addr: "localhost:0"}, up4.addr, up6.addr)
	if err := s.UpdateNameTable(marshalTable(t, testTable())); err != nil {
		t.Fatal(err)
	}
	run(t, s)
	addrs := s.Addrs()
	if len(addrs) != 2 || !addrs[0].Addr().Is4() || !addrs[1].Addr().Is6() || addrs[0].Port() != addrs[1].Port() {
		t.Fatalf("bound %v, want 127.0.0.1 and [::1] on one port", addrs)
	}
	for _, network := range []string{"udp", "tcp"} {
		r := ask(t, network, addrs[1].String(), "reviews.ns2.svc.cluster.local.", mdns.TypeAAAA, 0)
		if got := answers(r); !slices.Equal(got, []string{"reviews.ns2.svc.cluster.local. AAAA 2001:db8::2"}) {
			t.Fatalf("%s over [::1]: %v", network, got)
		}
		if r := ask(t, network, addrs[1].String(), "example.org.", mdns.TypeA, 0); len(r.Answer) != 1 {
			t.Fatalf("%s forward over [::1]: %v", network, r)
		}
	}
}

func TestMetrics(t *testing.T) {
	reg := metric.NewRegistry()
	_, addr, _ := startLoaded(t, Config{Registerer: reg})
	ask(t, "udp", addr, "productpage.", mdns.TypeA, 0)
	ask(t, "udp", addr, "example.org.", mdns.TypeA, 0)
	ask(t, "tcp", addr, "example.org.", mdns.TypeA, 0)
	for name, want := range map[string]float64{
		"istio_agent_dns_requests_total":          3,
		"istio_agent_dns_upstream_requests_total": 2,
		"istio_agent_dns_upstream_failures_total": 0,
	} {
		if got := counter(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n, ok := reg.Value("istio_agent_dns_upstream_request_duration_seconds"); !ok || n != 2 {
		t.Errorf("duration samples %v (registered: %v), want 2", n, ok)
	}
}

func counter(t *testing.T, reg *metric.Registry, name string) float64 {
	t.Helper()
	v, ok := reg.Value(name)
	if !ok {
		t.Fatalf("metric %s not registered", name)
	}
	return v
}

func TestNDSZ(t *testing.T) {
	s, _, _ := startLoaded(t, Config{AutoAllocate: true})
	raw, err := s.NDSZ()
	if err != nil {
		t.Fatal(err)
	}
	var doc ndszDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("ndsz is not JSON: %v\n%s", err, raw)
	}
	pp := doc.Table["productpage.ns1.svc.cluster.local"]
	wantNames := []string{"productpage.", "productpage.ns1.", "productpage.ns1.svc.", "productpage.ns1.svc.cluster.local."}
	if !doc.Ready || !doc.AutoAllocate || !slices.Equal(pp.Names, wantNames) {
		t.Fatalf("ndsz: ready %v auto %v productpage names %v", doc.Ready, doc.AutoAllocate, pp.Names)
	}
	if !slices.Contains(pp.SearchShortcuts, "productpage.ns1.svc.ns1.svc.cluster.local.") {
		t.Fatalf("productpage shortcuts %v", pp.SearchShortcuts)
	}
	if !doc.Table["bad.example.com"].Skipped || doc.Table["www.google.com"].Registry != "External" {
		t.Fatalf("ndsz entries: %s", raw)
	}
	if strings.Count(string(raw), "\"ips\"") != len(testTable()) {
		t.Fatalf("ndsz lists %d entries with ips, want %d", strings.Count(string(raw), "\"ips\""), len(testTable()))
	}
}

// TestSwapUnderLoad swaps tables while clients query; under -race this checks the lock-free
// read path, and every answer must come from one of the two tables.
func TestSwapUnderLoad(t *testing.T) {
	s, addr, _ := startLoaded(t, Config{})
	other := map[string]*ndspb.NameTable_NameInfo{"productpage.ns1.svc.cluster.local": kube("productpage", "ns1", "10.0.0.99")}
	stop := make(chan struct{})
	swapped := make(chan error, 1)
	go func() {
		tables := [][]byte{marshalTable(t, other), marshalTable(t, testTable())}
		for i := 0; ; i++ {
			select {
			case <-stop:
				swapped <- nil
				return
			default:
			}
			if err := s.UpdateNameTable(tables[i%2]); err != nil {
				swapped <- err
				return
			}
		}
	}()
	for range 200 {
		r := ask(t, "udp", addr, "productpage.", mdns.TypeA, 0)
		if got := answers(r); len(got) != 1 || (got[0] != "productpage. A 10.0.0.1" && got[0] != "productpage. A 10.0.0.99") {
			t.Fatalf("answer during swaps: %v", got)
		}
	}
	close(stop)
	if err := <-swapped; err != nil {
		t.Fatal(err)
	}
}

func TestRunTwiceAndClose(t *testing.T) {
	up := startUpstream(t, "127.0.0.1")
	s := newTestServer(t, Config{}, up.addr)
	errc := make(chan error, 1)
	go func() { errc <- s.Run(t.Context()) }()
	<-s.Bound()
	if err := s.Run(t.Context()); err == nil {
		t.Fatal("second Run succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
	// Binding a busy address fails Run with the address in the error.
	holder := newTestServer(t, Config{}, up.addr)
	hold := run(t, holder)
	busy := newTestServer(t, Config{Addr: hold}, up.addr)
	if err := busy.Run(t.Context()); err == nil || !strings.Contains(err.Error(), hold) {
		t.Fatalf("Run on a busy address: %v", err)
	}
}
