package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/wingman-mesh/wingman/internal/ndspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is a real miekg/dns server on one loopback port, UDP and TCP. It answers every A
// query with upstreamIP, "nx.*" with NXDOMAIN, and "big.*" with 100 A records, truncating
// like a real server to the client's size.
type upstream struct {
	addr netip.AddrPort
	mu   sync.Mutex
	nets []string // transport of every query received, guarded by mu
}

const upstreamIP = "10.9.9.9"

func bigAnswer(name string) []mdns.RR {
	var rrs []mdns.RR
	for i := range 100 {
		rr, _ := mdns.NewRR(fmt.Sprintf("%s 60 IN A 10.8.%d.%d", name, i/250, i%250+1))
		rrs = append(rrs, rr)
	}
	return rrs
}

func (u *upstream) ServeDNS(w mdns.ResponseWriter, r *mdns.Msg) {
	u.mu.Lock()
	u.nets = append(u.nets, w.RemoteAddr().Network())
	u.mu.Unlock()
	m := new(mdns.Msg)
	m.SetReply(r)
	name := strings.ToLower(r.Question[0].Name)
	switch {
	case strings.HasPrefix(name, "nx."):
		m.Rcode = mdns.RcodeNameError
	case strings.HasPrefix(name, "big."):
		m.Answer = bigAnswer(r.Question[0].Name)
	case r.Question[0].Qtype == mdns.TypeA:
		rr, _ := mdns.NewRR(r.Question[0].Name + " 60 IN A " + upstreamIP)
		m.Answer = []mdns.RR{rr}
	}
	size := mdns.MinMsgSize
	if o := r.IsEdns0(); o != nil {
		size = int(o.UDPSize())
		m.SetEdns0(o.UDPSize(), false)
	}
	if w.RemoteAddr().Network() == "tcp" {
		size = mdns.MaxMsgSize
	}
	m.Truncate(size)
	_ = w.WriteMsg(m)
}

func (u *upstream) transports() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.nets...)
}

// startUpstream serves u on ip (UDP and TCP, one port) until the test ends.
func startUpstream(t testing.TB, ip string) *upstream {
	t.Helper()
	u := &upstream{}
	var pc net.PacketConn
	var ln net.Listener
	for range 10 {
		var err error
		pc, err = net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Skipf("cannot listen on %s: %v", ip, err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		if ln, err = net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port))); err == nil {
			break
		}
		_ = pc.Close()
	}
	if ln == nil {
		t.Fatal("no free port for UDP and TCP")
	}
	u.addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	servers := []*mdns.Server{{PacketConn: pc, Handler: u}, {Listener: ln, Handler: u}}
	var wg sync.WaitGroup
	for _, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		wg.Go(func() { _ = srv.ActivateAndServe() })
		<-started
	}
	t.Cleanup(func() {
		for _, srv := range servers {
			_ = srv.Shutdown()
		}
		wg.Wait()
	})
	return u
}

// blackhole is a UDP socket that reads queries and never answers; got receives each one.
func blackhole(t testing.TB, reply func(req []byte) []byte) (netip.AddrPort, <-chan struct{}) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply != nil {
				_, _ = pc.WriteTo(reply(buf[:n]), addr)
			}
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); <-done })
	return pc.LocalAddr().(*net.UDPAddr).AddrPort(), got
}

// closedPort returns a loopback address nobody listens on (UDP and TCP).
func closedPort(t testing.TB) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	_ = ln.Close()
	return ap
}

func writeResolvConf(t testing.TB, servers []netip.AddrPort, search string) string {
	t.Helper()
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if search != "" {
		fmt.Fprintf(&b, "search %s\noptions ndots:5\n", search)
	}
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const testSearch = "ns1.svc.cluster.local svc.cluster.local cluster.local"

func kube(short, ns string, ips ...string) *ndspb.NameTable_NameInfo {
	return &ndspb.NameTable_NameInfo{Ips: ips, Registry: "Kubernetes", Shortname: short, Namespace: ns}
}

func external(ips ...string) *ndspb.NameTable_NameInfo {
	return &ndspb.NameTable_NameInfo{Ips: ips, Registry: "External"}
}

func headlessIPs(n int) []string {
	var ips []string
	for i := range n {
		ips = append(ips, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))
	}
	return ips
}

// testTable is the NameTable most tests load.
func testTable() map[string]*ndspb.NameTable_NameInfo {
	return map[string]*ndspb.NameTable_NameInfo{
		"productpage.ns1.svc.cluster.local": kube("productpage", "ns1", "10.0.0.1"),
		"reviews.ns2.svc.cluster.local":     kube("reviews", "ns2", "10.0.0.2", "2001:db8::2"),
		"headless.ns1.svc.cluster.local":    kube("headless", "ns1", headlessIPs(100)...),
		"www.google.com":                    external("1.1.1.1"),
		"*.wild.com":                        external("2.2.2.2"),
		"v6only.example.com":                external("2001:db8::6"),
		"bad.example.com":                   external("not-an-ip"),
	}
}

func marshalTable(t testing.TB, m map[string]*ndspb.NameTable_NameInfo) []byte {
	t.Helper()
	raw, err := (&ndspb.NameTable{Table: m}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// newTestServer builds a server whose resolv.conf lists servers and testSearch.
func newTestServer(t testing.TB, cfg Config, servers ...netip.AddrPort) *Server {
	t.Helper()
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = writeResolvConf(t, servers, testSearch)
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Namespace == "" {
		cfg.Namespace, cfg.Domain = "ns1", "ns1.svc.cluster.local"
	}
	if cfg.ForwardTimeout == 0 {
		cfg.ForwardTimeout = 2 * time.Second
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run starts s and returns its address once bound; the test's end stops it and checks Run's
// result.
func run(t testing.TB, s *Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-s.Bound():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not bind")
	}
	return s.Addrs()[0].String()
}

// startLoaded starts a server over a fresh upstream with testTable loaded.
func startLoaded(t testing.TB, cfg Config) (*Server, string, *upstream) {
	t.Helper()
	up := startUpstream(t, "127.0.0.1")
	s := newTestServer(t, cfg, up.addr)
	if err := s.UpdateNameTable(marshalTable(t, testTable())); err != nil {
		t.Fatal(err)
	}
	return s, run(t, s), up
}

// ask sends one query with a real miekg/dns client; ednsSize 0 sends no OPT.
func ask(t testing.TB, network, addr, name string, qtype uint16, ednsSize uint16) *mdns.Msg {
	t.Helper()
	m := new(mdns.Msg)
	m.SetQuestion(name, qtype)
	if ednsSize > 0 {
		m.SetEdns0(ednsSize, false)
	}
	c := &mdns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s query %s %s: %v", network, name, mdns.TypeToString[qtype], err)
	}
	return r
}

// askRaw sends a packed query over UDP and returns the raw reply.
func askRaw(t testing.TB, addr string, query []byte) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(query); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func pack(t testing.TB, name string, qtype uint16, ednsSize uint16) []byte {
	t.Helper()
	m := new(mdns.Msg)
	m.SetQuestion(name, qtype)
	if ednsSize > 0 {
		m.SetEdns0(ednsSize, false)
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// answers renders r's answer section as "owner type value" lines, sorted by position.
func answers(r *mdns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		switch v := rr.(type) {
		case *mdns.A:
			out = append(out, v.Hdr.Name+" A "+v.A.String())
		case *mdns.AAAA:
			a, _ := netip.AddrFromSlice(v.AAAA) // keeps an IPv4-mapped address in IPv6 form
			out = append(out, v.Hdr.Name+" AAAA "+a.String())
		case *mdns.CNAME:
			out = append(out, v.Hdr.Name+" CNAME "+v.Target)
		default:
			out = append(out, rr.String())
		}
	}
	return out
}
