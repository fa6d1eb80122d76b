package dns

import (
	"encoding/binary"
	"math/rand/v2"
)

// worker holds the buffers one goroutine needs to serve a query. A worker is owned by one
// goroutine at a time (a UDP reader, or a TCP connection or forward taken from the pool).
type worker struct {
	q     query
	rbuf  []byte  // request read buffer (64 KiB)
	wbuf  []byte  // response buffer (64 KiB)
	tcp   []byte  // length-prefixed TCP output, grown on first use
	key   []byte  // lower-cased query name (cap 256)
	wild  []byte  // wildcard probe (cap 258)
	order []int32 // shuffle scratch, grown to the largest answer seen
}

func newWorker() *worker {
	return &worker{
		rbuf: make([]byte, maxMsgSize),
		wbuf: make([]byte, 0, maxMsgSize),
		key:  make([]byte, 0, 256),
		wild: make([]byte, 0, 258),
	}
}

// appendTableAnswer appends the authoritative answer to q from e to dst, keeping the message
// within limit bytes: records that do not fit are left out and TC is set. For a name with no
// record of the asked family the answer is NOERROR with no records (Istio #31250). Address
// records are shuffled (DNS round robin). It allocates nothing once w.order has grown.
func (w *worker) appendTableAnswer(dst []byte, q *query, e *entry, searchWire, limit int) []byte {
	base := len(dst)
	b := append(dst, make([]byte, headerLen)...)
	b = append(b, q.question...)
	reserve := 0
	if q.edns {
		reserve = optLen
	}
	limit += base
	src := e
	if e.target != nil {
		src = e.target
	}
	recs, size := src.records(q.qtype)
	n := len(recs) / size
	var an uint16
	tc := false
	owner := uint16(0xC000 | headerLen) // pointer to the question name
	if e.target != nil && n > 0 {
		// CNAME from the query name to the query name without the search domain; the target
		// copies the client's labels, so its letter case is the client's.
		prefix := q.qnameLen - searchWire
		if prefix > 0 {
			rr := 12 + prefix + 1
			if len(b)+rr+reserve > limit {
				tc, n = true, 0
			} else {
				b = append(b, 0xC0, headerLen, 0, typeCNAME, 0, classINET, 0, 0, 0, ttlSeconds)
				b = binary.BigEndian.AppendUint16(b, uint16(prefix+1))
				owner = uint16(0xC000 | (len(b) - base))
				b = append(b, q.question[:prefix]...)
				b = append(b, 0)
				an++
			}
		}
	}
	if n > 0 {
		order := w.shuffled(n)
		for _, i := range order {
			if len(b)+2+size+reserve > limit {
				tc = true
				break
			}
			b = binary.BigEndian.AppendUint16(b, owner)
			b = append(b, recs[int(i)*size:int(i+1)*size]...)
			an++
		}
	}
	var ar uint16
	if q.edns {
		b = appendOPT(b, 0)
		ar = 1
	}
	flags := responseFlags(q, 0) | flagAA
	if tc {
		flags |= flagTC
	}
	putHeader(b[base:], q.id, flags, 1, an, 0, ar)
	return b
}

// shuffled returns 0..n-1 in random order, in w's scratch.
func (w *worker) shuffled(n int) []int32 {
	if cap(w.order) < n {
		w.order = make([]int32, n)
	}
	o := w.order[:n]
	for i := range o {
		o[i] = int32(i)
	}
	for i := n - 1; i > 0; i-- {
		j := rand.IntN(i + 1)
		o[i], o[j] = o[j], o[i]
	}
	return o
}
