package dns

import (
	"encoding/binary"
	"errors"
)

// Wire constants (RFC 1035, RFC 6891).
const (
	headerLen   = 12
	maxNameWire = 255   // longest name in wire form, root byte included
	maxMsgSize  = 65535 // largest DNS message (TCP)
	minUDPSize  = 512   // UDP answer size without EDNS, and the floor of an EDNS size
	maxUDPSize  = 4096  // the UDP payload size our OPT records advertise (what we accept)
	optLen      = 11    // an OPT RR with no options
	ttlSeconds  = 30    // TTL of table answers, as Istio

	typeA     = 1
	typeCNAME = 5
	typeAAAA  = 28
	typeOPT   = 41
	classINET = 1

	rcodeFormErr    = 1
	rcodeServFail   = 2
	rcodeNotImp     = 4
	rcodeRefused    = 5
	extRcodeBadVers = 1 // upper bits of BADVERS (16) carried in the OPT TTL

	flagQR     = 1 << 15
	flagOpcode = 0xF << 11
	flagAA     = 1 << 10
	flagTC     = 1 << 9
	flagRD     = 1 << 8
	flagRA     = 1 << 7
	flagCD     = 1 << 4
	flagRcode  = 0xF
)

// verdict says what to do with a packet after parsing it.
type verdict uint8

const (
	verdictOK      verdict = iota // a well-formed query
	verdictDrop                   // not a query (too short, or a response): send nothing
	verdictFormErr                // malformed: answer FORMERR
	verdictNotImp                 // an opcode other than QUERY: answer NOTIMP
)

// query is what the proxy needs from one request. Slices point into the request buffer and
// the worker's scratch; a query is owned by the goroutine serving that request.
type query struct {
	id    uint16
	flags uint16
	// question is the question section exactly as received (qname, qtype, qclass); answers
	// echo it so the client's letter case (0x20 randomisation) comes back unchanged.
	// nil if the question could not be parsed.
	question []byte
	qnameLen int // wire length of the qname, root byte included
	qtype    uint16
	qclass   uint16
	// key is the qname lower-cased in presentation form with the trailing dot ("a.b.").
	key []byte
	// plain is false when a label holds a byte no table name can hold ('.', '\\', space,
	// non-ASCII); such names are never looked up.
	plain       bool
	edns        bool
	ednsSize    uint16
	ednsVersion uint8
}

// parseQuery parses pkt into q, writing the lower-cased name into key (cap >= 256, so the
// append never grows it). It never panics on any input and allocates nothing.
func parseQuery(pkt []byte, q *query, key []byte) verdict {
	*q = query{}
	if len(pkt) < headerLen {
		return verdictDrop
	}
	q.id = binary.BigEndian.Uint16(pkt[0:])
	q.flags = binary.BigEndian.Uint16(pkt[2:])
	if q.flags&flagQR != 0 {
		return verdictDrop
	}
	if q.flags&flagOpcode != 0 {
		return verdictNotImp
	}
	qd := binary.BigEndian.Uint16(pkt[4:])
	an := binary.BigEndian.Uint16(pkt[6:])
	ns := binary.BigEndian.Uint16(pkt[8:])
	ar := binary.BigEndian.Uint16(pkt[10:])
	// The same limits as miekg/dns's default accept function.
	if qd != 1 || an > 1 || ns > 1 || ar > 2 {
		return verdictFormErr
	}
	off := headerLen
	k := key[:0]
	plain := true
	for {
		if off >= len(pkt) {
			return verdictFormErr
		}
		l := int(pkt[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 { // a compression pointer or an extended label type: not valid in a question
			return verdictFormErr
		}
		if off+l > len(pkt) || off+l-headerLen+1 > maxNameWire {
			return verdictFormErr
		}
		for _, c := range pkt[off : off+l] {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			} else if c <= ' ' || c > '~' || c == '.' || c == '\\' {
				plain = false
			}
			k = append(k, c)
		}
		k = append(k, '.')
		off += l
	}
	if len(k) == 0 {
		k = append(k, '.')
	}
	if off+4 > len(pkt) {
		return verdictFormErr
	}
	q.qnameLen = off - headerLen
	q.qtype = binary.BigEndian.Uint16(pkt[off:])
	q.qclass = binary.BigEndian.Uint16(pkt[off+2:])
	off += 4
	q.question = pkt[headerLen:off]
	q.key = k
	q.plain = plain
	for i := 0; i < int(an)+int(ns); i++ {
		next, _, err := skipRR(pkt, off)
		if err != nil {
			return verdictFormErr
		}
		off = next
	}
	for i := 0; i < int(ar); i++ {
		start := off
		next, rrType, err := skipRR(pkt, off)
		if err != nil {
			return verdictFormErr
		}
		if rrType == typeOPT {
			if q.edns || pkt[start] != 0 { // two OPTs, or an OPT not owned by the root
				return verdictFormErr
			}
			q.edns = true
			q.ednsSize = binary.BigEndian.Uint16(pkt[start+3:])
			q.ednsVersion = pkt[start+6]
		}
		off = next
	}
	return verdictOK
}

var errMalformed = errors.New("malformed message")

// skipRR returns the offset past the resource record at off and its type.
func skipRR(msg []byte, off int) (int, uint16, error) {
	off, err := nameEnd(msg, off)
	if err != nil {
		return 0, 0, err
	}
	if off+10 > len(msg) {
		return 0, 0, errMalformed
	}
	t := binary.BigEndian.Uint16(msg[off:])
	rdlen := int(binary.BigEndian.Uint16(msg[off+8:]))
	off += 10 + rdlen
	if off > len(msg) {
		return 0, 0, errMalformed
	}
	return off, t, nil
}

// responseFlags returns the flags of a reply to q: QR, the request's opcode, RD and CD copied,
// RA set (the proxy recurses by forwarding), and rcode.
func responseFlags(q *query, rcode int) uint16 {
	return flagQR | flagRA | q.flags&(flagOpcode|flagRD|flagCD) | uint16(rcode&flagRcode)
}

func putHeader(b []byte, id, flags, qd, an, ns, ar uint16) {
	binary.BigEndian.PutUint16(b[0:], id)
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint16(b[4:], qd)
	binary.BigEndian.PutUint16(b[6:], an)
	binary.BigEndian.PutUint16(b[8:], ns)
	binary.BigEndian.PutUint16(b[10:], ar)
}

// appendOPT appends an OPT RR advertising maxUDPSize, with extended rcode ext.
func appendOPT(b []byte, ext uint8) []byte {
	return append(b, 0, 0, typeOPT, maxUDPSize>>8, maxUDPSize&0xff, ext, 0, 0, 0, 0, 0)
}

// appendError appends a reply to q carrying only rcode (and the question when it was
// parsed, and an OPT when the query had one). Its size is at most the query's size plus
// an OPT, so an error never amplifies.
func appendError(dst []byte, q *query, rcode int) []byte {
	b := append(dst, make([]byte, headerLen)...)
	var qd, ar uint16
	if q.question != nil {
		b = append(b, q.question...)
		qd = 1
	}
	ext := uint8(0)
	if rcode > 15 {
		ext = uint8(rcode >> 4)
	}
	if q.edns {
		b = appendOPT(b, ext)
		ar = 1
	}
	putHeader(b[len(dst):], q.id, responseFlags(q, rcode&0xF), qd, 0, 0, ar)
	return b
}

// appendHeaderOnly appends a reply with no sections, for a packet whose header parsed but
// nothing else (FORMERR, NOTIMP).
func appendHeaderOnly(dst []byte, q *query, rcode int) []byte {
	b := append(dst, make([]byte, headerLen)...)
	putHeader(b[len(dst):], q.id, responseFlags(q, rcode), 0, 0, 0, 0)
	return b
}

// udpLimit is the largest UDP answer q's client accepts: 512 without EDNS, else its EDNS size
// raised to 512 (RFC 6891 §6.2.5) and not capped, as Istio's size()/ednsSize() in
// pkg/dns/client/dns.go, which feed miekg/dns's Msg.Truncate.
func udpLimit(q *query) int {
	if !q.edns {
		return minUDPSize
	}
	return max(int(q.ednsSize), minUDPSize)
}
