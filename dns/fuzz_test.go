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

// FuzzUpstreamReply feeds arbitrary bytes as an upstream's reply to a fixed query through the
// checks and the cut to the client's size, as forward does: nothing panics, a reply that
// fails the checks is never relayed, and what is relayed fits the client and carries the
// query's ID.
func FuzzUpstreamReply(f *testing.F) {
	reqs := [][]byte{pack(f, "example.org.", mdns.TypeA, 0), pack(f, "Big.Example.org.", mdns.TypeA, 1232)}
	for _, req := range reqs {
		m := new(mdns.Msg)
		_ = m.Unpack(req)
		r := new(mdns.Msg)
		r.SetReply(m)
		r.Answer = bigAnswer(m.Question[0].Name)
		full, _ := r.Pack()
		f.Add(uint8(len(reqs)-1), full)
		r.Answer = r.Answer[:1]
		one, _ := r.Pack()
		f.Add(uint8(0), one)
		r.Rcode = mdns.RcodeServerFailure
		r.Answer = nil
		sf, _ := r.Pack()
		f.Add(uint8(1), sf)
	}
	f.Fuzz(func(t *testing.T, which uint8, resp []byte) {
		req := reqs[int(which)%len(reqs)]
		var q query
		if parseQuery(req, &q, make([]byte, 0, 256)) != verdictOK {
			t.Fatal("seed query does not parse")
		}
		if checkReply(resp, &q) != nil {
			return
		}
		for _, limit := range []int{minUDPSize, udpLimit(&q), maxMsgSize} {
			out := fitReply(make([]byte, 0, maxMsgSize), resp, &q, limit)
			if len(out) > limit || len(out) < headerLen {
				t.Fatalf("relayed %d bytes for a limit of %d", len(out), limit)
			}
			if binary.BigEndian.Uint16(out) != q.id {
				t.Fatalf("relayed reply has ID %#x, query %#x", binary.BigEndian.Uint16(out), q.id)
			}
		}
	})
}
