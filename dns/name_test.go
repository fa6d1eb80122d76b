package dns

import (
	"encoding/binary"
	"testing"

	mdns "github.com/miekg/dns"
)

// A query's records are walked like an upstream's reply (nameEnd): a name miekg/dns cannot
// unpack, which Istio's server (miekg/dns serveDNS: Unpack fails -> FORMERR) refuses, is a
// FORMERR here too, while a well-formed backward pointer is accepted.
func TestQueryRecordNames(t *testing.T) {
	s := newTestServer(t, Config{})
	if err := s.UpdateNameTable(marshalTable(t, testTable())); err != nil {
		t.Fatal(err)
	}
	q := pack(t, "productpage.", mdns.TypeA, 0)
	binary.BigEndian.PutUint16(q[10:], 1) // one additional record
	qname := headerLen
	rr := func(name ...byte) []byte {
		b := append(append([]byte(nil), q...), name...)
		return append(b, 0, 16, 0, 1, 0, 0, 0, 0, 0, 0) // TXT IN, TTL 0, no rdata
	}
	self := len(q)
	long := []byte{}
	for range 5 {
		long = append(long, 63)
		long = append(long, make([]byte, 63)...)
	}
	for _, tc := range []struct {
		name string
		pkt  []byte
		ok   bool
	}{
		{"pointer to the question name", rr(0xC0, byte(qname)), true},
		{"pointer to itself", rr(0xC0|byte(self>>8), byte(self)), false},
		{"pointer past the end", rr(0xC0|0x3F, 0xFF), false},
		{"name over 255 octets", rr(append(long, 0)...), false},
	} {
		miekgErr := new(mdns.Msg).Unpack(tc.pkt)
		if (miekgErr == nil) != tc.ok {
			t.Fatalf("%s: miekg/dns Unpack: %v, want ok %v (the reference moved)", tc.name, miekgErr, tc.ok)
		}
		w := newWorker()
		resp, fwd := s.handle(w, tc.pkt, false)
		if fwd {
			t.Fatalf("%s: forwarded", tc.name)
		}
		m := new(mdns.Msg)
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("%s: reply does not parse: %v", tc.name, err)
		}
		if got := m.Rcode == mdns.RcodeFormatError; got == tc.ok {
			t.Errorf("%s: rcode %s, want FORMERR %v", tc.name, mdns.RcodeToString[m.Rcode], !tc.ok)
		}
	}
}
