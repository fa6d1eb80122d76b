package h2grpc

import (
	"io"
	"sync"

	"google.golang.org/grpc/mem"
)

// recvBuffer holds a stream's request data between the connection's reader (put) and the
// handler's RecvMsg (Read). Each DATA payload is copied once, into a buffer of
// mem.DefaultBufferPool, which goes back to the pool when read. It also keeps the stream's
// receive window: what the peer may still send, and what has been read but not yet granted
// back (granted with one WINDOW_UPDATE once it reaches a quarter of the window, as grpc-go).
type recvBuffer struct {
	sc *serverConn
	id uint32

	mu     sync.Mutex
	cond   sync.Cond // on mu: data, the end, or an error arrived
	chunks []*[]byte // pooled buffers of received data, from head on
	head   int       // first chunk not fully read
	off    int       // bytes of chunks[head] already read
	win    recvWindow
	eof    bool  // END_STREAM received
	err    error // the stream ended abnormally; Read returns it
}

func (rb *recvBuffer) init(sc *serverConn, id uint32, window int) {
	rb.sc, rb.id = sc, id
	rb.win.init(window)
	rb.cond.L = &rb.mu
}

// reserve counts a DATA frame against the stream's window (flen: its flow-controlled length,
// padding included; size: its data). ok is false when the frame exceeds the window (the
// caller resets the stream with FLOW_CONTROL_ERROR); take is false when the data is to be
// dropped (nothing to keep, or the stream has ended for its handler). Padding is consumed on
// arrival: grant is the window update it makes due, for the caller to send.
func (rb *recvBuffer) reserve(flen int64, size int) (take, ok bool, grant int64) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if !rb.win.take(flen) {
		return false, false, 0
	}
	grant = rb.win.consumed(flen-int64(size), rb.eof || rb.err != nil)
	return size > 0 && rb.err == nil && !rb.eof, true, grant
}

// add queues a pooled buffer of data (reserved first) for the reader, which puts it back to
// the pool; dropped when the stream ended meanwhile.
func (rb *recvBuffer) add(bp *[]byte) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.err != nil {
		mem.DefaultBufferPool().Put(bp)
		return
	}
	rb.chunks = append(rb.chunks, bp)
	rb.cond.Signal()
}

// end records END_STREAM: Read returns io.EOF once the data is read.
func (rb *recvBuffer) end() {
	rb.mu.Lock()
	rb.eof = true
	rb.cond.Signal()
	rb.mu.Unlock()
}

// ended reports whether END_STREAM arrived.
func (rb *recvBuffer) ended() bool {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.eof
}

// fail ends the stream's receive side with err (the first error stays).
func (rb *recvBuffer) fail(err error) {
	rb.mu.Lock()
	if rb.err == nil {
		rb.err = err
	}
	rb.cond.Broadcast()
	rb.mu.Unlock()
}

// release returns the buffers not read to the pool; the stream is over.
func (rb *recvBuffer) release() {
	rb.mu.Lock()
	pool := mem.DefaultBufferPool()
	for i := rb.head; i < len(rb.chunks); i++ {
		pool.Put(rb.chunks[i])
	}
	clear(rb.chunks)
	rb.chunks, rb.head, rb.off = nil, 0, 0
	if rb.err == nil {
		rb.err = io.ErrClosedPipe
	}
	rb.cond.Broadcast() // a receiver may outlive the handler (the proxy's receive loop does)
	rb.mu.Unlock()
}

// Read copies received data into p, waiting for some; io.EOF at the end of the request, the
// stream's error when it ended otherwise.
func (rb *recvBuffer) Read(p []byte) (int, error) {
	rb.mu.Lock()
	for rb.head == len(rb.chunks) {
		if rb.err != nil {
			err := rb.err
			rb.mu.Unlock()
			return 0, err
		}
		if rb.eof {
			rb.mu.Unlock()
			return 0, io.EOF
		}
		rb.cond.Wait()
	}
	if rb.err != nil {
		err := rb.err
		rb.mu.Unlock()
		return 0, err
	}
	pool := mem.DefaultBufferPool()
	n := 0
	for n < len(p) && rb.head < len(rb.chunks) {
		c := *rb.chunks[rb.head]
		m := copy(p[n:], c[rb.off:])
		n += m
		rb.off += m
		if rb.off == len(c) {
			pool.Put(rb.chunks[rb.head])
			rb.chunks[rb.head] = nil
			rb.head++
			rb.off = 0
		}
	}
	if rb.head == len(rb.chunks) {
		rb.chunks, rb.head = rb.chunks[:0], 0
	}
	grant := rb.win.consumed(int64(n), rb.eof)
	rb.mu.Unlock()
	if grant > 0 {
		rb.sc.writeWindowUpdate(rb.id, uint32(grant))
	}
	return n, nil
}
