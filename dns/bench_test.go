package dns

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

// startReference runs the baseline: a plain miekg/dns server whose handler forwards every
// query with dns.Client.Exchange to up, as a minimal Go DNS forwarder would.
func startReference(tb testing.TB, up netip.AddrPort) string {
	tb.Helper()
	client := &mdns.Client{Net: "udp", Timeout: 5 * time.Second}
	h := mdns.HandlerFunc(func(w mdns.ResponseWriter, r *mdns.Msg) {
		resp, _, err := client.Exchange(r, up.String())
		if err != nil {
			resp = new(mdns.Msg).SetRcode(r, mdns.RcodeServerFailure)
		}
		_ = w.WriteMsg(resp)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &mdns.Server{PacketConn: pc, Handler: h}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.ActivateAndServe() })
	<-started
	tb.Cleanup(func() { _ = srv.Shutdown(); wg.Wait() })
	return pc.LocalAddr().String()
}

// udpClient is a raw connected UDP socket: the client side allocates nothing, so the
// benchmark's allocations are the servers'.
type udpClient struct {
	c   net.Conn
	buf []byte
}

func dialUDP(tb testing.TB, addr string) *udpClient {
	tb.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return &udpClient{c: c, buf: make([]byte, 65535)}
}

func (u *udpClient) roundTrip(tb testing.TB, q []byte) {
	if _, err := u.c.Write(q); err != nil {
		tb.Fatal(err)
	}
	_ = u.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := u.c.Read(u.buf); err != nil || n < headerLen || u.buf[3]&0xF != 0 {
		tb.Fatalf("round trip: %d bytes, err %v", n, err)
	}
}

// BenchmarkServeDNS measures UDP round trips through the proxy: table hits, and forwards to a
// loopback upstream, next to the same forwards through the reference miekg/dns forwarder.
// The "vs-reference" cases interleave both servers query by query and report the ratio of
// their mean latencies, so each run carries its own baseline.
func BenchmarkServeDNS(b *testing.B) {
	up := startUpstream(b, "127.0.0.1")
	s := newTestServer(b, Config{}, up.addr)
	if err := s.UpdateNameTable(marshalTable(b, testTable())); err != nil {
		b.Fatal(err)
	}
	addr := run(b, s)
	ref := startReference(b, up.addr)
	hit := pack(b, "productpage.ns1.svc.cluster.local.", mdns.TypeA, 0)
	shortcut := pack(b, "www.google.com.ns1.svc.cluster.local.", mdns.TypeA, 0)
	fwd := pack(b, "example.org.", mdns.TypeA, 0)

	single := func(addr string, q []byte) func(*testing.B) {
		return func(b *testing.B) {
			c := dialUDP(b, addr)
			b.ReportAllocs()
			b.SetBytes(int64(len(q)))
			for b.Loop() {
				c.roundTrip(b, q)
			}
		}
	}
	versus := func(q []byte) func(*testing.B) {
		return func(b *testing.B) {
			ours, theirs := dialUDP(b, addr), dialUDP(b, ref)
			var tOurs, tRef time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				ours.roundTrip(b, q)
				t1 := time.Now()
				theirs.roundTrip(b, fwd)
				tRef += time.Since(t1)
				tOurs += t1.Sub(t0)
			}
			b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "wingman-ns/op")
			b.ReportMetric(float64(tRef.Nanoseconds())/float64(b.N), "reference-ns/op")
			b.ReportMetric(float64(tOurs)/float64(tRef), "ratio")
		}
	}
	b.Run("table-hit", single(addr, hit))
	b.Run("table-hit-cname", single(addr, shortcut))
	b.Run("upstream-direct", single(up.addr.String(), fwd)) // the upstream's own share
	b.Run("forward", single(addr, fwd))
	b.Run("reference-forward", single(ref, fwd))
	b.Run("table-hit-vs-reference", versus(hit))
	b.Run("forward-vs-reference", versus(fwd))
}
