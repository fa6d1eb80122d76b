package h2grpc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// h2stream is one HTTP/2 stream of a clientConn: its send window and state (under cc.mu) and
// its receive buffer (under mu), filled by the reader goroutine and drained by the stream's
// receiver.
type h2stream struct {
	cc       *clientConn
	id       uint32
	deadline time.Time // the call's context deadline; zero: none

	// guarded by cc.mu
	sendWin   int64
	localEnd  bool // END_STREAM or RST_STREAM sent: nothing more goes out
	remoteEnd bool // END_STREAM or RST_STREAM received (or reset by us): nothing more comes in

	notify chan struct{} // buffered 1: the receive state changed

	mu         sync.Mutex // guards the fields below
	gotHeaders bool
	httpStatus int
	header     http.Header
	trailer    http.Header
	q          []*[]byte // received data, oldest first, from qh on
	qh         int
	off        int // bytes of q[qh] already read
	recvEnd    bool
	err        error // the stream's end for the receiver once q is drained; nil: open or clean
	recvWin    recvWindow
}

func (s *h2stream) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// push queues a received buffer; the caller holds mu.
func (s *h2stream) push(b *[]byte) {
	if s.qh == len(s.q) {
		s.q, s.qh = s.q[:0], 0
	}
	s.q = append(s.q, b)
}

// dropLocked frees every queued buffer and returns their bytes; the caller holds mu.
func (s *h2stream) dropLocked() int64 {
	var n int64
	pool := mem.DefaultBufferPool()
	for i := s.qh; i < len(s.q); i++ {
		n += int64(len(*s.q[i]))
		pool.Put(s.q[i])
		s.q[i] = nil
	}
	n -= int64(s.off)
	s.q, s.qh, s.off = s.q[:0], 0, 0
	return n
}

// read copies queued data into p, waiting for some. It returns io.EOF at a clean end and the
// stream's error after its data; ctx ending returns its status.
func (s *h2stream) read(ctx context.Context, p []byte) (int, error) {
	return s.take(ctx, p, len(p))
}

// discard drops up to n queued bytes, waiting for some, as read does without the copy.
func (s *h2stream) discard(ctx context.Context, n int) (int, error) {
	return s.take(ctx, nil, n)
}

// take moves up to max queued bytes into p (nil: drops them) and grants what it took.
func (s *h2stream) take(ctx context.Context, p []byte, max int) (int, error) {
	for {
		s.mu.Lock()
		if s.qh < len(s.q) {
			n := 0
			pool := mem.DefaultBufferPool()
			for n < max && s.qh < len(s.q) {
				b := (*s.q[s.qh])[s.off:]
				c := min(len(b), max-n)
				if p != nil {
					copy(p[n:], b[:c])
				}
				n += c
				s.off += c
				if c == len(b) {
					pool.Put(s.q[s.qh])
					s.q[s.qh] = nil
					s.qh++
					s.off = 0
				}
			}
			grant := s.grantLocked(n)
			s.mu.Unlock()
			if grant > 0 {
				s.cc.writeWindowUpdate(s.id, uint32(grant))
			}
			s.cc.consumed(int64(n))
			return n, nil
		}
		err := s.err
		end := s.recvEnd
		s.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if end {
			return 0, io.EOF
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return 0, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// awaitHeaders waits for the response headers (or the stream's end).
func (s *h2stream) awaitHeaders(ctx context.Context) error {
	for {
		s.mu.Lock()
		got, err := s.gotHeaders, s.err
		s.mu.Unlock()
		if got {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// consumed grants the server n more bytes of the stream once a quarter of the window is owed.
func (s *h2stream) consumed(n int) {
	s.mu.Lock()
	grant := s.grantLocked(n)
	s.mu.Unlock()
	if grant > 0 {
		s.cc.writeWindowUpdate(s.id, uint32(grant))
	}
}

// grantLocked counts n bytes consumed and returns the window update to send, if any (none once
// the server has ended the stream); the caller holds mu.
func (s *h2stream) grantLocked(n int) int64 {
	return s.recvWin.consumed(int64(n), s.recvEnd || s.err != nil)
}

// endRecv ends the receive side with err (nil: cleanly) unless it has ended already.
func (s *h2stream) endRecv(err error) {
	s.mu.Lock()
	if s.err == nil && !s.recvEnd {
		if err == nil {
			s.recvEnd = true
		} else {
			s.err = err
		}
	}
	s.mu.Unlock()
	s.wake()
}

// removeLocked forgets a stream that is over in both directions; the caller holds cc.mu.
func (cc *clientConn) removeLocked(s *h2stream) {
	if !s.localEnd || !s.remoteEnd {
		return
	}
	if cc.streams[s.id] == s {
		delete(cc.streams, s.id)
		cc.active--
		cc.cond.Broadcast()
	}
}

// remoteEnd records the server's END_STREAM: the trailers (or the headers of a
// trailers-only response). A stream we have not half-closed is then reset with NO_ERROR, as
// grpc-go's client does, so the server stops counting it.
func (cc *clientConn) remoteEnd(s *h2stream, httpStatus int, header, trailer http.Header) {
	s.mu.Lock()
	if header != nil {
		s.gotHeaders, s.httpStatus, s.header = true, httpStatus, header
	}
	if trailer != nil {
		s.trailer = trailer
	}
	s.mu.Unlock()
	s.endRecv(nil)
	cc.mu.Lock()
	s.remoteEnd = true
	rst := !s.localEnd
	s.localEnd = true
	cc.removeLocked(s)
	goneAway := cc.goaway && len(cc.streams) == 0
	cc.cond.Broadcast()
	cc.mu.Unlock()
	if rst {
		cc.writeRST(s.id, http2.ErrCodeNo)
	}
	if goneAway {
		cc.close(nil)
	}
}

// remoteReset ends a stream the server reset (or refused with GOAWAY).
func (cc *clientConn) remoteReset(s *h2stream, err error) {
	s.endRecv(err)
	cc.mu.Lock()
	s.remoteEnd, s.localEnd = true, true
	cc.removeLocked(s)
	goneAway := cc.goaway && len(cc.streams) == 0
	cc.cond.Broadcast()
	cc.mu.Unlock()
	if goneAway {
		cc.close(nil)
	}
}

// reset ends a stream from our side with RST_STREAM(code) unless it is over already; the
// receiver sees err; buffered data is freed and its bytes go back to the connection window.
func (cc *clientConn) reset(s *h2stream, code http2.ErrCode, err error) {
	cc.mu.Lock()
	over := s.localEnd && s.remoteEnd
	s.localEnd, s.remoteEnd = true, true
	cc.removeLocked(s)
	goneAway := cc.goaway && len(cc.streams) == 0
	dead := cc.dead != nil
	cc.cond.Broadcast()
	cc.mu.Unlock()
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	n := s.dropLocked()
	s.mu.Unlock()
	s.wake()
	if !dead {
		cc.consumed(n)
	}
	if !over && !dead {
		cc.writeRST(s.id, code)
	}
	if goneAway {
		cc.close(nil)
	}
}

// open starts a stream: it waits for a slot under the server's MAX_CONCURRENT_STREAMS, then
// writes the HEADERS (path and fields) with the next stream ID. errGoAwayRefused: the
// connection stopped taking streams before this one started; open it on another.
func (cc *clientConn) open(ctx context.Context, scheme, path string, fields [][2]string) (*h2stream, error) {
	cc.mu.Lock()
	var stop func() bool
	for cc.dead == nil && !cc.goaway && uint32(cc.active) >= cc.maxStreams && ctx.Err() == nil {
		if stop == nil {
			stop = context.AfterFunc(ctx, func() {
				cc.mu.Lock()
				cc.cond.Broadcast()
				cc.mu.Unlock()
			})
		}
		cc.cond.Wait()
	}
	if stop != nil {
		stop()
	}
	switch {
	case ctx.Err() != nil:
		cc.mu.Unlock()
		return nil, status.FromContextError(ctx.Err()).Err()
	case cc.dead != nil || cc.goaway:
		cc.mu.Unlock()
		return nil, errGoAwayRefused
	}
	cc.active++
	cc.mu.Unlock()

	cc.lockWrite()
	cc.mu.Lock()
	if cc.dead != nil || cc.goaway || cc.nextID > maxWindow {
		cc.goaway = cc.goaway || cc.nextID > maxWindow
		cc.active--
		cc.cond.Broadcast()
		cc.mu.Unlock()
		cc.unlockWrite()
		return nil, errGoAwayRefused
	}
	s := &h2stream{
		cc:      cc,
		id:      cc.nextID,
		sendWin: cc.peerWin,
		notify:  make(chan struct{}, 1),
	}
	s.recvWin.init(cc.cfg.StreamWindow)
	s.deadline, _ = ctx.Deadline()
	cc.nextID += 2
	cc.streams[s.id] = s
	cc.mu.Unlock()

	if cc.werr == nil {
		cc.hbuf.Reset()
		cc.encodeField(":method", "POST")
		cc.encodeField(":scheme", scheme)
		cc.encodeField(":path", path)
		cc.encodeField(":authority", cc.cfg.Address)
		timeout := !s.deadline.IsZero()
		for _, f := range fields {
			cc.encodeField(f[0], f[1])
			timeout = timeout && f[0] != "grpc-timeout" // the caller's own replaces ours
		}
		if timeout {
			// ctx's deadline as grpc-go sends it, measured now: after the dial and the wait
			// for a stream slot, which the server's timer must not count twice.
			cc.encodeField("grpc-timeout", encodeTimeout(time.Until(s.deadline)))
		}
		cc.writeHeaderBlockLocked(s.id, false)
	}
	if err := cc.unlockWrite(); err != nil {
		// The connection is lost: the reader fails the stream; tell the caller now.
		return nil, errConnLost(cc.cfg.Address, err)
	}
	return s, nil
}

// send writes pieces as DATA (END_STREAM after them when end), waiting for the stream's and
// the connection's send windows. It returns false when the stream ended first.
func (s *h2stream) send(pieces [][]byte, end bool) bool {
	cc := s.cc
	left := 0
	for _, p := range pieces {
		left += len(p)
	}
	for first := true; first || left > 0; first = false {
		cc.mu.Lock()
		n := 0
		var err error
		if left > 0 {
			n, err = cc.reserveLocked(s, left)
		} else {
			err = s.sendStopLocked()
		}
		if err != nil {
			cc.mu.Unlock()
			return false
		}
		last := end && n == left
		if last {
			s.localEnd = true
			cc.removeLocked(s)
		}
		cc.mu.Unlock()

		cc.lockWrite()
		pieces = cc.writeDataLocked(s.id, pieces, n, last)
		left -= n
		if cc.unlockWrite() != nil {
			return false
		}
	}
	return true
}

// errStreamDone stops a client stream's sender: the stream or the connection has ended.
var errStreamDone = errors.New("stream ended")

// sendWindowPtr and sendStopLocked make h2stream a sendStream (core_flow.go).
func (s *h2stream) sendWindowPtr() *int64 { return &s.sendWin }

func (s *h2stream) sendStopLocked() error {
	if s.localEnd || s.cc.dead != nil {
		return errStreamDone
	}
	return nil
}

// response is the receiver's view of the response: HTTP status and headers, trailers.
func (s *h2stream) response() (code int, header, trailer http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.httpStatus, s.header, s.trailer
}
