package h2grpc

import (
	"encoding/binary"
	"io"
	"math"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/mem"
)

// readWindowUpdate reads and applies a WINDOW_UPDATE frame's payload itself: x/net's Framer
// allocates every WINDOW_UPDATE frame it parses (it reuses only DATA frames), and a peer
// sends one per quarter window. Errors as RFC 9113 section 6.9 says, as the Framer would.
func (sc *serverConn) readWindowUpdate(fh http2.FrameHeader) error {
	if fh.Length != 4 {
		return http2.ConnectionError(http2.ErrCodeFrameSize)
	}
	if _, err := io.ReadFull(sc.br, sc.wuBuf[:]); err != nil {
		return err
	}
	inc := binary.BigEndian.Uint32(sc.wuBuf[:]) & 0x7fffffff
	if inc == 0 {
		if fh.StreamID == 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return http2.StreamError{StreamID: fh.StreamID, Code: http2.ErrCodeProtocol}
	}
	if code, ok := sc.onWindowUpdate(fh.StreamID, inc); !ok {
		return http2.ConnectionError(code)
	}
	return nil
}

// readData reads a DATA frame's payload itself, straight from the connection's read buffer
// into a pooled buffer the stream's reader takes: one copy (x/net's Framer would first copy
// it into its own frame buffer). Padding is checked and skipped, and counts in flow control.
func (sc *serverConn) readData(fh http2.FrameHeader) error {
	id, flen := fh.StreamID, int64(fh.Length)
	if id == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol) // section 6.1
	}
	size, pad := int(fh.Length), 0
	if fh.Flags.Has(http2.FlagDataPadded) {
		b, err := sc.br.ReadByte()
		if err != nil {
			return err
		}
		pad = int(b)
		if size == 0 || pad >= size {
			return http2.ConnectionError(http2.ErrCodeProtocol) // section 6.1: padding too long
		}
		size -= 1 + pad
	}
	// Section 6.9: the connection's window counts every DATA frame, for any stream.
	if flen > sc.connRecv {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	sc.connRecv -= flen
	sc.connUnacked += flen
	if sc.connUnacked >= int64(sc.s.cfg.ConnWindow)/4 {
		sc.writeWindowUpdate(0, sc.connUnacked)
		sc.connRecv += sc.connUnacked
		sc.connUnacked = 0
	}
	s := sc.stream(id)
	var failed http2.ErrCode
	take := false
	a := sc.answered[id]
	switch {
	case s == nil && sc.idle(id):
		return http2.ConnectionError(http2.ErrCodeProtocol) // DATA on an idle stream (section 5.1)
	case a != nil:
		// Answered already: the body is counted and discarded.
		a.got += int64(size)
		switch {
		case a.contentLen >= 0 && (a.got > a.contentLen || fh.Flags.Has(http2.FlagDataEndStream) && a.got != a.contentLen):
			delete(sc.answered, id)
			failed = http2.ErrCodeProtocol // section 8.1.1: content-length disagrees with DATA
		case fh.Flags.Has(http2.FlagDataEndStream):
			delete(sc.answered, id)
		}
	case s == nil:
		failed = http2.ErrCodeStreamClosed // a closed stream (section 5.1), as Go's HTTP/2 server
	case s.rb.ended():
		failed = http2.ErrCodeStreamClosed // DATA after END_STREAM (section 5.1)
	default:
		var ok bool
		if take, ok = s.rb.reserve(flen, size); !ok {
			failed = http2.ErrCodeFlowControl
		}
	}
	if take {
		bp := mem.DefaultBufferPool().Get(size)
		if _, err := io.ReadFull(sc.br, *bp); err != nil {
			mem.DefaultBufferPool().Put(bp)
			return err
		}
		s.rb.add(bp)
	} else if _, err := sc.br.Discard(size); err != nil {
		return err
	}
	if _, err := sc.br.Discard(pad); err != nil {
		return err
	}
	switch {
	case failed != 0:
		sc.streamFailed(id, failed)
	case s != nil && fh.Flags.Has(http2.FlagDataEndStream):
		s.rb.end()
	}
	return nil
}

func (sc *serverConn) onWindowUpdate(id, increment uint32) (http2.ErrCode, bool) {
	inc := int64(increment)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if id == 0 {
		if sc.connSend+inc > math.MaxInt32 {
			return http2.ErrCodeFlowControl, false // section 6.9.1
		}
		sc.connSend += inc
		sc.cond.Broadcast()
		return 0, true
	}
	s := sc.streams[id]
	if s == nil {
		if sc.idle(id) {
			return http2.ErrCodeProtocol, false // WINDOW_UPDATE on an idle stream (section 5.1)
		}
		if a := sc.answered[id]; a != nil {
			if a.sendWin += inc; a.sendWin > math.MaxInt32 {
				delete(sc.answered, id)
				sc.mu.Unlock()
				sc.writeReset(id, http2.ErrCodeFlowControl) // section 6.9.1
				sc.mu.Lock()
			}
		}
		return 0, true // a closed stream: the peer may not know yet
	}
	if s.sendWin+inc > math.MaxInt32 {
		sc.mu.Unlock()
		sc.streamFailed(id, http2.ErrCodeFlowControl)
		sc.mu.Lock()
		return 0, true
	}
	s.sendWin += inc
	sc.cond.Broadcast()
	return 0, true
}

// reserve waits until s may send and returns how much of want it may send now (taken from
// the stream's and the connection's send windows), or why it cannot send any more.
func (sc *serverConn) reserve(s *ServerStream, want int) (int, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for {
		switch {
		case sc.closed:
			return 0, errConnClosed
		case s.reset:
			return 0, errStreamReset
		case s.ctx.Err() != nil:
			return 0, s.ctx.Err()
		case s.sendWin > 0 && sc.connSend > 0:
			n := min(int64(want), s.sendWin, sc.connSend, maxSendBatch)
			s.sendWin -= n
			sc.connSend -= n
			return int(n), nil
		}
		sc.cond.Wait()
	}
}

// maxSendBatch bounds what one sender writes under the connection's writer at a time: with a
// peer's window as large as Envoy's (256 MiB by default) a whole large message could go in one
// hold, keeping other streams and the reader's control frames (PING and SETTINGS acks,
// WINDOW_UPDATE) waiting for all of it to reach the socket.
const maxSendBatch = 256 << 10

// wake makes goroutines waiting in reserve look again (a stream's context ended).
func (sc *serverConn) wake() {
	sc.mu.Lock()
	sc.cond.Broadcast()
	sc.mu.Unlock()
}
