package dns

import (
	"net"
	"sync"
	"testing"

	mdns "github.com/miekg/dns"
)

// TestTableHitAllocs is the allocation budget of a table hit, measured from the received
// datagram to the written answer (parse, lookup, encode, metrics, sendto): zero.
//   - parse: the query is read in place; the lower-cased name goes to worker scratch.
//   - lookup: map indexing with string(bytes) does not copy; the table is one atomic load.
//   - encode: records are pre-encoded per host and copied after a compression pointer; the
//     shuffle uses worker scratch that grew on the warm-up call.
//   - metrics: a counter Inc is an atomic add.
//   - send: WriteToUDPAddrPort takes a netip.AddrPort, so no net.UDPAddr is built.
func TestTableHitAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation budget needs a normal build")
	}
	s := newTestServer(t, Config{}, closedPort(t))
	if err := s.UpdateNameTable(marshalTable(t, testTable())); err != nil {
		t.Fatal(err)
	}
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	to := client.LocalAddr().(*net.UDPAddr).AddrPort()
	w := newWorker()
	var wg sync.WaitGroup
	for _, c := range []struct {
		name  string
		qtype uint16
		edns  uint16
	}{
		{"productpage.ns1.svc.cluster.local.", mdns.TypeA, 0},
		{"productpage.", mdns.TypeA, 1232},
		{"www.google.com.ns1.svc.cluster.local.", mdns.TypeA, 0}, // CNAME shortcut
		{"x.wild.com.", mdns.TypeA, 0},                           // wildcard probe
		{"productpage.", mdns.TypeAAAA, 0},                       // missing family
		{"headless.ns1.svc.cluster.local.", mdns.TypeA, 4096},    // 100 shuffled records
		{"headless.ns1.svc.cluster.local.", mdns.TypeA, 0},       // truncated
	} {
		pkt := pack(t, c.name, c.qtype, c.edns)
		serve := func() {
			n := copy(w.rbuf, pkt)
			s.serveUDPPacket(t.Context(), w, srv, w.rbuf[:n], to, &wg)
		}
		serve() // warm-up: grows the shuffle scratch
		if allocs := testing.AllocsPerRun(200, serve); allocs != 0 {
			t.Errorf("%s %s: %v allocations per table hit, budget 0", c.name, mdns.TypeToString[c.qtype], allocs)
		}
	}
	wg.Wait()
}
