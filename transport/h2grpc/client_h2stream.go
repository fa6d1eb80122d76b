package h2grpc

import (
	"context"
	"errors"
	"net/http"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/status"
)

// h2stream is one HTTP/2 stream of a clientConn: its send window and state (under cc.mu) and
// its receive side (in, the core's recvStream), filled by the reader goroutine and drained by
// the stream's receiver.
type h2stream struct {
	cc       *clientConn
	id       uint32
	deadline time.Time // the call's context deadline; zero: none

	// guarded by cc.mu
	sendWin   int64
	localEnd  bool // END_STREAM or RST_STREAM sent: nothing more goes out
	remoteEnd bool // END_STREAM or RST_STREAM received (or reset by us): nothing more comes in

	in recvStream // the response data; in.mu also guards the fields below, in.cond their changes

	gotHeaders bool // written by the reader goroutine only
	httpStatus int
	header     http.Header
	trailer    http.Header
}

// recv and peerEnded make h2stream the core's receiver (core_recv.go).
func (s *h2stream) recv() *recvStream { return &s.in }

func (s *h2stream) peerEnded() { s.cc.remoteEnd(s, 0, nil, nil) }

// awaitHeaders waits for the response headers (or the stream's end). The stream's context
// ending resets it (ClientStream), which ends the wait.
func (s *h2stream) awaitHeaders() error {
	s.in.mu.Lock()
	defer s.in.mu.Unlock()
	for !s.gotHeaders {
		if s.in.err != nil {
			return s.in.err
		}
		s.in.cond.Wait()
	}
	return nil
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
	s.in.mu.Lock()
	if header != nil {
		s.gotHeaders, s.httpStatus, s.header = true, httpStatus, header
	}
	if trailer != nil {
		s.trailer = trailer
	}
	s.in.mu.Unlock()
	s.in.end(nil)
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
	s.in.end(err)
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
// receiver sees err; buffered data is freed.
func (cc *clientConn) reset(s *h2stream, code http2.ErrCode, err error) {
	cc.mu.Lock()
	over := s.localEnd && s.remoteEnd
	s.localEnd, s.remoteEnd = true, true
	cc.removeLocked(s)
	goneAway := cc.goaway && len(cc.streams) == 0
	dead := cc.dead != nil
	cc.cond.Broadcast()
	cc.mu.Unlock()
	s.in.abort(err)
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
	}
	s.in.init(&cc.conn, s.id, cc.cfg.StreamWindow)
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

// sendWindowPtr and sendStopLocked make h2stream a sendStream (core_send.go).
func (s *h2stream) sendWindowPtr() *int64 { return &s.sendWin }

func (s *h2stream) sendStopLocked() error {
	if s.localEnd || s.cc.dead != nil {
		return errStreamDone
	}
	return nil
}

// response is the receiver's view of the response: HTTP status and headers, trailers.
func (s *h2stream) response() (code int, header, trailer http.Header) {
	s.in.mu.Lock()
	defer s.in.mu.Unlock()
	return s.httpStatus, s.header, s.trailer
}
