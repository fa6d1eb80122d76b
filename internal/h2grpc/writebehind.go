package h2grpc

import (
	"net"
	"sync"
)

// writeBehindMax bounds the bytes a writeBehindConn holds that its socket has not taken.
const writeBehindMax = 64 << 10

// writeBehindConn batches the server's writes. net/http's HTTP/2 server writes every DATA
// frame (16 KiB for Envoy) with its own write(2), and its peer then reads frame by frame;
// grpc-go batches. Here Write copies into a buffer of at most writeBehindMax bytes and a
// goroutine writes whatever has gathered while its last write(2) ran: an idle connection
// writes at once (no timer, no added latency), a busy one in big writes. A full buffer blocks
// Write, so the server's handler writes still wait for a reader that does not read (plus at
// most writeBehindMax bytes). Close drops what is not written yet: the server closes a
// connection only when stopping or when it has failed.
type writeBehindConn struct {
	net.Conn

	mu      sync.Mutex
	cond    sync.Cond // on mu: the buffer or the state changed
	buf     []byte    // bytes waiting for the writer goroutine
	spare   []byte    // the writer's buffer while it writes; nil then
	err     error     // the socket's write error, sticky
	closing bool
	done    chan struct{} // closed when the writer goroutine has returned
}

func newWriteBehindConn(c net.Conn) *writeBehindConn {
	w := &writeBehindConn{
		Conn:  c,
		buf:   make([]byte, 0, writeBehindMax),
		spare: make([]byte, 0, writeBehindMax),
		done:  make(chan struct{}),
	}
	w.cond.L = &w.mu
	go w.writeLoop()
	return w
}

func (w *writeBehindConn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for len(p) > 0 {
		switch {
		case w.err != nil:
			return n, w.err
		case w.closing:
			return n, net.ErrClosed
		}
		room := cap(w.buf) - len(w.buf)
		if room == 0 {
			w.cond.Wait()
			continue
		}
		k := min(room, len(p))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		n += k
		w.cond.Broadcast()
	}
	return n, nil
}

// writeLoop writes the gathered bytes until Close or a write error.
func (w *writeBehindConn) writeLoop() {
	defer close(w.done)
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for len(w.buf) == 0 && !w.closing {
			w.cond.Wait()
		}
		if w.closing {
			return
		}
		out := w.buf
		w.buf, w.spare = w.spare[:0], nil
		w.cond.Broadcast() // room for writers
		w.mu.Unlock()
		_, err := w.Conn.Write(out)
		w.mu.Lock()
		w.spare = out[:0]
		if err != nil {
			w.err = err
			w.buf = w.buf[:0]
			w.cond.Broadcast()
			return
		}
	}
}

func (w *writeBehindConn) Close() error {
	w.mu.Lock()
	w.closing = true
	w.cond.Broadcast()
	w.mu.Unlock()
	err := w.Conn.Close() // also ends a write(2) in progress
	<-w.done
	return err
}

// writeBehindListener wraps every accepted connection in a writeBehindConn.
type writeBehindListener struct{ net.Listener }

func (l writeBehindListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newWriteBehindConn(c), nil
}
