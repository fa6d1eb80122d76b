package dns

import (
	"encoding/binary"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

// FuzzServeDNS feeds raw packets to the query path (table answers, errors, and forwards to a
// real loopback upstream) over both transports and checks that nothing panics, every reply
// parses and carries the query's ID, no UDP reply exceeds what the client allows, and a
// reply without records is never bigger than the query plus an OPT record (no amplification).
func FuzzServeDNS(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
		edns  uint16
	}{
		{"productpage.ns1.svc.cluster.local.", mdns.TypeA, 0},
		{"headless.ns1.svc.cluster.local.", mdns.TypeA, 0},
		{"headless.ns1.svc.cluster.local.", mdns.TypeA, 700},
		{"www.google.com.ns1.svc.cluster.local.", mdns.TypeA, 1232},
		{"a.wild.com.ns1.svc.cluster.local.", mdns.TypeAAAA, 0},
		{"reviews.ns2.", mdns.TypeAAAA, 0},
		{"big.example.org.", mdns.TypeA, 0},
		{"example.org.", mdns.TypeTXT, 4096},
	} {
		f.Add(pack(f, q.name, q.qtype, q.edns))
	}
	f.Add([]byte{0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0xC0, 12, 0, 1, 0, 1})
	f.Add([]byte{0x12, 0x34, 0x28, 0, 0, 1, 0, 0, 0, 0, 0, 0})

	up := startUpstream(f, "127.0.0.1")
	s := newTestServer(f, Config{ForwardTimeout: time.Second}, up.addr)
	if err := s.UpdateNameTable(marshalTable(f, testTable())); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		for _, tcp := range []bool{false, true} {
			w := newWorker()
			resp, fwd := s.handle(w, pkt, tcp)
			if fwd {
				resp = s.forward(t.Context(), pkt, &w.q, tcp, w.wbuf[:0])
			}
			if resp == nil {
				continue
			}
			checkReplyProperties(t, pkt, resp, &w.q, tcp)
		}
	})
}

func checkReplyProperties(t *testing.T, pkt, resp []byte, q *query, tcp bool) {
	t.Helper()
	m := new(mdns.Msg)
	if err := m.Unpack(resp); err != nil {
		t.Fatalf("reply does not parse: %v\nquery %x\nreply %x", err, pkt, resp)
	}
	if m.Id != binary.BigEndian.Uint16(pkt) || !m.Response {
		t.Fatalf("reply id %#x response %v for query id %#x", m.Id, m.Response, binary.BigEndian.Uint16(pkt))
	}
	limit := maxMsgSize
	if !tcp {
		limit = udpLimit(q)
	}
	if len(resp) > limit {
		t.Fatalf("reply of %d bytes, client allows %d (tcp %v)\nquery %x", len(resp), limit, tcp, pkt)
	}
	if len(m.Answer)+len(m.Ns) == 0 && len(resp) > len(pkt)+optLen {
		t.Fatalf("reply without records of %d bytes for a %d-byte query", len(resp), len(pkt))
	}
}
