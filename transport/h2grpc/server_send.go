package h2grpc

// reserve waits until s may send and returns how much of want it may send now (taken from
// the stream's and the connection's send windows), or why it cannot send any more.
func (sc *serverConn) reserve(s *ServerStream, want int) (int, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.reserveLocked(s, want)
}

// sendWindowPtr and sendStopLocked make ServerStream a sendStream (core_send.go).
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
