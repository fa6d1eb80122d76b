package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
)

// forwarder sends queries to the resolv.conf nameservers. Immutable after New; safe for
// concurrent use.
type forwarder struct {
	servers  []netip.AddrPort
	timeout  time.Duration
	parallel bool
	bufs     sync.Pool // *[]byte of maxMsgSize+2, for exchanges
}

// errNoServers is the forwarding error when resolv.conf has no nameserver.
var errNoServers = errors.New("resolv.conf lists no nameserver")

// reply is one upstream answer; resp aliases buf, which the receiver puts back.
type reply struct {
	resp []byte
	buf  *[]byte
	err  error
}

func (f *forwarder) getBuf() *[]byte {
	if b, ok := f.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, maxMsgSize+2)
	return &b
}

func (f *forwarder) putBuf(b *[]byte) {
	if b != nil {
		f.bufs.Put(b)
	}
}

// exchange forwards req (the client's bytes) over the client's transport and returns the
// first reply that is a well-formed answer to it, whatever its rcode, as Istio's
// LocalDNSServer.queryUpstream does: a SERVFAIL or REFUSED from the first server is relayed,
// not retried elsewhere; only a network error, a timeout or a malformed reply moves on to
// the next server. A truncated UDP reply is relayed as it came (TC set), in one upstream
// query: the client retries over TCP, and that query goes upstream over TCP. The caller puts
// back the reply's buffer.
func (f *forwarder) exchange(ctx context.Context, req []byte, q *query, tcp bool) reply {
	if len(f.servers) == 0 {
		return reply{err: errNoServers}
	}
	if f.parallel && len(f.servers) > 1 {
		return f.exchangeParallel(ctx, req, q, tcp)
	}
	var lastErr error
	start := rand.IntN(len(f.servers)) // a random first server spreads load (istio#53419)
	for i := range f.servers {
		r := f.exchangeOne(ctx, f.servers[(start+i)%len(f.servers)], req, q, tcp)
		if r.err == nil {
			return r
		}
		lastErr = r.err
		if ctx.Err() != nil {
			break
		}
	}
	return reply{err: lastErr}
}

// exchangeParallel asks every server at once and returns the first well-formed reply, as
// Istio's queryUpstreamParallel does; it waits for the goroutines it starts before returning.
func (f *forwarder) exchangeParallel(ctx context.Context, req []byte, q *query, tcp bool) reply {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan reply, len(f.servers))
	var wg sync.WaitGroup
	for _, srv := range f.servers {
		wg.Go(func() { ch <- f.exchangeOne(ctx, srv, req, q, tcp) })
	}
	var best reply
	var lastErr error
	for range f.servers {
		r := <-ch
		if r.err != nil {
			lastErr = r.err
			continue
		}
		best = r
		break
	}
	cancel()
	wg.Wait()
	close(ch)
	for r := range ch {
		f.putBuf(r.buf)
	}
	if best.resp != nil {
		return best
	}
	return reply{err: lastErr}
}

// exchangeOne asks one server over the client's transport; garbage, a mismatched reply or a
// network error is an error.
func (f *forwarder) exchangeOne(ctx context.Context, srv netip.AddrPort, req []byte, q *query, tcp bool) reply {
	buf := f.getBuf()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	var resp []byte
	var err error
	if tcp {
		resp, err = exchangeTCP(ctx, srv, req, *buf)
	} else {
		resp, err = exchangeUDP(ctx, srv, req, q.id, *buf)
	}
	if err == nil {
		err = checkReply(resp, q)
	}
	if err != nil {
		f.putBuf(buf)
		return reply{err: fmt.Errorf("upstream %s: %w", srv, err)}
	}
	return reply{resp: resp, buf: buf}
}

// longAgo is a deadline in the past, to unblock I/O when the context ends.
var longAgo = time.Unix(1, 0)

func dialUpstream(ctx context.Context, network string, srv netip.AddrPort) (net.Conn, func() bool, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, srv.String())
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(longAgo) })
	return conn, stop, nil
}

// exchangeUDP sends req from a fresh socket (random source port) and returns the first
// datagram that carries req's ID and the response bit; others are ignored, as spoofing
// attempts would be.
func exchangeUDP(ctx context.Context, srv netip.AddrPort, req []byte, id uint16, buf []byte) ([]byte, error) {
	conn, stop, err := dialUpstream(ctx, "udp", srv)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer stop()
	if _, err := conn.Write(req); err != nil {
		return nil, err
	}
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		if n >= headerLen && binary.BigEndian.Uint16(buf) == id && buf[2]&0x80 != 0 {
			return buf[:n], nil
		}
	}
}

// exchangeTCP sends req length-prefixed over a fresh connection and reads one reply.
func exchangeTCP(ctx context.Context, srv netip.AddrPort, req []byte, buf []byte) ([]byte, error) {
	conn, stop, err := dialUpstream(ctx, "tcp", srv)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer stop()
	var prefix [2]byte
	binary.BigEndian.PutUint16(prefix[:], uint16(len(req)))
	bufs := net.Buffers{prefix[:], req}
	if _, err := bufs.WriteTo(conn); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(conn, prefix[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(prefix[:]))
	if _, err := io.ReadFull(conn, buf[:n]); err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// checkReply verifies that resp answers q and is well framed: same ID, response bit, the
// same question (letter case aside; a reply without question is accepted only with an error
// rcode), and every record inside the message with sane names and address lengths.
func checkReply(resp []byte, q *query) error {
	if len(resp) < headerLen {
		return fmt.Errorf("reply of %d bytes is shorter than a header", len(resp))
	}
	flags := binary.BigEndian.Uint16(resp[2:])
	if binary.BigEndian.Uint16(resp) != q.id || flags&flagQR == 0 {
		return errors.New("reply does not match the query ID")
	}
	qd := binary.BigEndian.Uint16(resp[4:])
	off := headerLen
	switch {
	case qd == 1:
		end := headerLen + len(q.question)
		if end > len(resp) || !sameQuestion(q.question, resp[headerLen:end]) {
			return errors.New("reply question differs from the query's")
		}
		off = end
	case qd == 0 && flags&flagRcode != 0:
	default:
		return fmt.Errorf("reply has %d questions", qd)
	}
	count := int(binary.BigEndian.Uint16(resp[6:])) + int(binary.BigEndian.Uint16(resp[8:])) +
		int(binary.BigEndian.Uint16(resp[10:]))
	for range count {
		next, err := checkRR(resp, off)
		if err != nil {
			return fmt.Errorf("reply record at offset %d: %w", off, err)
		}
		off = next
	}
	return nil
}

// nameEnd follows the name at off through compression pointers (backwards only, at most 126,
// the whole name within 255 octets) and returns the offset just past it where it appears. It
// is the one walk over names in a message: a query's records (parseQuery) and an upstream's
// reply (checkReply) are read alike, and a name miekg/dns would not unpack (a pointer loop or
// one past the end, a name over 255 octets) fails both.
func nameEnd(msg []byte, off int) (int, error) {
	end, wire := -1, 0
	for hops := 0; ; {
		if off >= len(msg) {
			return 0, errMalformed
		}
		c := int(msg[off])
		switch c & 0xC0 {
		case 0x00:
			if c == 0 {
				if end < 0 {
					end = off + 1
				}
				return end, nil
			}
			wire += c + 1
			if wire+1 > maxNameWire || off+1+c > len(msg) {
				return 0, errMalformed
			}
			off += 1 + c
		case 0xC0:
			if off+2 > len(msg) {
				return 0, errMalformed
			}
			ptr := (c&0x3F)<<8 | int(msg[off+1])
			if end < 0 {
				end = off + 2
			}
			if ptr >= off || hops > 126 {
				return 0, errMalformed
			}
			hops++
			off = ptr
		default:
			return 0, errMalformed
		}
	}
}

// checkRR checks the framing of the record at off, and the rdata of the types whose rdata
// a stub resolver reads (addresses and names).
func checkRR(msg []byte, off int) (int, error) {
	off, err := nameEnd(msg, off)
	if err != nil {
		return 0, err
	}
	if off+10 > len(msg) {
		return 0, errMalformed
	}
	t := binary.BigEndian.Uint16(msg[off:])
	rdlen := int(binary.BigEndian.Uint16(msg[off+8:]))
	rd := off + 10
	end := rd + rdlen
	if end > len(msg) {
		return 0, errMalformed
	}
	nameAt := -1
	switch t {
	case typeA:
		if rdlen != 4 {
			return 0, fmt.Errorf("A record with %d bytes of address", rdlen)
		}
	case typeAAAA:
		if rdlen != 16 {
			return 0, fmt.Errorf("AAAA record with %d bytes of address", rdlen)
		}
	case mdns.TypeCNAME, mdns.TypeNS, mdns.TypePTR, mdns.TypeDNAME:
		nameAt = rd
	case mdns.TypeMX:
		nameAt = rd + 2
	case mdns.TypeSRV:
		nameAt = rd + 6
	}
	if nameAt >= 0 {
		next, err := nameEnd(msg[:end], nameAt)
		if err != nil || next != end {
			return 0, fmt.Errorf("type %d record with a malformed name", t)
		}
	}
	return end, nil
}

// fitReply returns resp cut to limit bytes: as is when it fits, else re-packed by
// miekg/dns's Truncate, as Istio's ServeDNS does: compressed, TC set only when records had
// to be left out (or the upstream had set it), so an uncompressed reply that fits once
// compressed is relayed whole. A reply that cannot be parsed becomes SERVFAIL. The result
// aliases dst.
func fitReply(dst, resp []byte, q *query, limit int) []byte {
	if len(resp) <= limit {
		return append(dst, resp...)
	}
	m := new(mdns.Msg)
	if err := m.Unpack(resp); err != nil {
		return appendError(dst, q, rcodeServFail)
	}
	m.Truncate(limit)
	out, err := m.PackBuffer(dst[len(dst):cap(dst)])
	if err != nil || len(out) > limit {
		b := appendError(dst, q, 0)
		b[len(dst)+2] |= flagTC >> 8
		return b
	}
	return append(dst, out...)
}

// sameQuestion compares two question sections of equal length, ignoring ASCII letter case
// in the labels only. a was framed by parseQuery, so its labels are well formed.
func sameQuestion(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	i := 0
	for i < len(a) && a[i] != 0 {
		l := int(a[i])
		if b[i] != a[i] || i+1+l > len(a) {
			return false
		}
		for j := i + 1; j <= i+l; j++ {
			if lower(a[j]) != lower(b[j]) {
				return false
			}
		}
		i += 1 + l
	}
	return string(a[i:]) == string(b[i:])
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
