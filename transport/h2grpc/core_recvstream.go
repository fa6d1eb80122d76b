package h2grpc

import (
	"io"
	"sync"

	"github.com/wingman-mesh/wingman/internal/rawpool"
)

// recvStream is a stream's receive side, the same type on both sides (a client's h2stream, a
// server's ServerStream): the data the connection's reader queued for the stream's one
// receiving goroutine, the stream's receive window, and the wake-up between the two. Each DATA
// payload is copied once, by the reader, into a buffer of internal/rawpool (readPayload),
// which goes back to the pool once read. The receiver learns of its context's end through the
// side's abort (the client's reset, the server's context.AfterFunc), not by waiting on it.
type recvStream struct {
	c  *conn
	id uint32

	mu     sync.Mutex
	cond   sync.Cond // on mu: data, the end or an error arrived (or, on a client, the headers)
	chunks []*[]byte // received data, oldest first, from head on
	head   int       // first chunk not fully read
	off    int       // bytes of chunks[head] already read
	win    recvWindow
	eof    bool  // END_STREAM received: the reader gets io.EOF after the data
	err    error // the stream ended otherwise: the reader gets it (after the data end queued)
}

func (rs *recvStream) init(c *conn, id uint32, window int) {
	rs.c, rs.id = c, id
	rs.win.init(window)
	rs.cond.L = &rs.mu
}

// overLocked reports whether nothing more is to be read from the peer: no window is granted
// back then. The caller holds mu.
func (rs *recvStream) overLocked() bool { return rs.eof || rs.err != nil }

// Read copies received data into p, waiting for some: io.EOF at the clean end of the
// stream, the stream's error when it ended otherwise.
func (rs *recvStream) Read(p []byte) (int, error) { return rs.take(p, len(p)) }

// discard drops up to n received bytes, waiting for some, as Read does without the copy.
func (rs *recvStream) discard(n int) (int, error) { return rs.take(nil, n) }

// take moves up to max received bytes into p (nil: drops them), returns their buffers to the
// pool and grants the peer the stream window they held once half of it is owed.
func (rs *recvStream) take(p []byte, max int) (int, error) {
	rs.mu.Lock()
	for rs.head == len(rs.chunks) {
		if err := rs.err; err != nil {
			rs.mu.Unlock()
			return 0, err
		}
		if rs.eof {
			rs.mu.Unlock()
			return 0, io.EOF
		}
		rs.cond.Wait()
	}
	pool := rawpool.Default
	n := 0
	for n < max && rs.head < len(rs.chunks) {
		b := (*rs.chunks[rs.head])[rs.off:]
		k := min(len(b), max-n)
		if p != nil {
			copy(p[n:], b[:k])
		}
		n += k
		rs.off += k
		if k == len(b) {
			pool.Put(rs.chunks[rs.head])
			rs.chunks[rs.head] = nil
			rs.head++
			rs.off = 0
		}
	}
	if rs.head == len(rs.chunks) {
		rs.chunks, rs.head = rs.chunks[:0], 0
	}
	grant := rs.win.consumed(int64(n), rs.overLocked())
	rs.mu.Unlock()
	if grant > 0 {
		rs.c.writeWindowUpdate(rs.id, uint32(grant))
	}
	return n, nil
}

// end records the peer's end of the stream: nil is END_STREAM; an error (the peer reset the
// stream, the connection was lost) is the reader's after the data already queued, unless the
// stream had ended already.
func (rs *recvStream) end(err error) {
	rs.mu.Lock()
	switch {
	case err == nil:
		rs.eof = true
	case !rs.eof && rs.err == nil:
		rs.err = err
	}
	rs.cond.Broadcast()
	rs.mu.Unlock()
}

// ended reports whether END_STREAM arrived.
func (rs *recvStream) ended() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.eof
}

// abort ends the stream for its reader now: the data not read goes back to the pool and the
// reader gets err (the first error stays). Data arriving afterwards is dropped on arrival.
func (rs *recvStream) abort(err error) {
	rs.mu.Lock()
	pool := rawpool.Default
	for i := rs.head; i < len(rs.chunks); i++ {
		pool.Put(rs.chunks[i])
		rs.chunks[i] = nil
	}
	rs.chunks, rs.head, rs.off = rs.chunks[:0], 0, 0
	if rs.err == nil {
		rs.err = err
	}
	rs.cond.Broadcast()
	rs.mu.Unlock()
}

// recvWindow is a stream's receive window, guarded by its stream's lock: what the peer may
// still send on the stream, and what was consumed and not yet granted back, granted with one
// WINDOW_UPDATE once half the window is owed. grpc-go grants at a quarter; each grant is a
// write system call (a TLS record upstream) from the stream's reader, and at a quarter of the
// 1 MiB window the binary spent 9 % of its CPU on 4 MB pushes writing them
// (perf/results/profile-binary.md). At half, the peer still has half a window (512 KiB by
// default) to send while the grant is on its way.
type recvWindow struct {
	size    int64 // the full window (StreamWindow)
	win     int64 // what the peer may still send
	unacked int64 // consumed, not yet granted
}

func (w *recvWindow) init(size int) { w.size, w.win = int64(size), int64(size) }

// take counts a DATA frame of flen bytes (padding included) against the window; false: the
// frame exceeds it, a stream FLOW_CONTROL_ERROR (RFC 9113 section 6.9.1).
func (w *recvWindow) take(flen int64) bool {
	if flen > w.win {
		return false
	}
	w.win -= flen
	return true
}

// consumed counts n bytes consumed (read by the stream's reader, or padding on arrival) and
// returns the increment to grant now, 0 while less than half the window is owed or
// once nothing more is to come from the peer (over).
func (w *recvWindow) consumed(n int64, over bool) int64 {
	if over {
		return 0
	}
	w.unacked += n
	if w.unacked < w.size/2 {
		return 0
	}
	grant := w.unacked
	w.unacked = 0
	w.win += grant
	return grant
}
