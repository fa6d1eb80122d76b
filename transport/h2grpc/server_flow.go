package h2grpc

import "golang.org/x/net/http2"

// readData reads a DATA frame after its header (the core's readFrame): its payload goes
// into a pooled buffer the stream's reader takes (readPayload). Padding is checked and
// skipped, and counts in flow control.
func (sc *serverConn) readData(fh http2.FrameHeader) error {
	id, flen := fh.StreamID, int64(fh.Length)
	size, pad, err := sc.readDataStart(fh)
	if err != nil {
		return err
	}
	// The connection's window is granted back on arrival: a stream's own window holds back
	// what its handler has not read.
	sc.consumed(flen)
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
		var grant int64
		if take, ok, grant = s.rb.reserve(flen, size); !ok {
			failed = http2.ErrCodeFlowControl
		} else if grant > 0 {
			sc.writeWindowUpdate(id, uint32(grant))
		}
	}
	if take {
		bp, err := sc.readPayload(size)
		if err != nil {
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

// reserve waits until s may send and returns how much of want it may send now (taken from
// the stream's and the connection's send windows), or why it cannot send any more.
func (sc *serverConn) reserve(s *ServerStream, want int) (int, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.reserveLocked(s, want)
}

// sendWindowPtr and sendStopLocked make ServerStream a sendStream (core_flow.go).
func (s *ServerStream) sendWindowPtr() *int64 { return &s.sendWin }

func (s *ServerStream) sendStopLocked() error {
	switch {
	case s.sc.closed:
		return errConnClosed
	case s.reset:
		return errStreamReset
	}
	return s.ctx.Err()
}

// maxSendBatch bounds what one sender writes under the connection's writer at a time: with a
// peer's window as large as Envoy's (256 MiB by default) a whole large message could go in one
// hold, keeping other streams and the reader's control frames (PING and SETTINGS acks,
// WINDOW_UPDATE) waiting for all of it to reach the socket.
const maxSendBatch = 256 << 10
