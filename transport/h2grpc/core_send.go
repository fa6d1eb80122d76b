package h2grpc

import (
	"encoding/binary"
	"errors"
	"io"

	"golang.org/x/net/http2"
)

// errWindowOverflow is the cause of a stream's FLOW_CONTROL_ERROR for a WINDOW_UPDATE taking
// its send window past 2^31-1 (RFC 9113 section 6.9.1).
var errWindowOverflow = errors.New("send window over 2^31-1")

// readWindowUpdate reads and applies a WINDOW_UPDATE frame's payload after its header itself:
// x/net's Framer allocates every WINDOW_UPDATE frame it parses (it reuses only DATA frames),
// and a peer sends one per quarter or half window. Errors as RFC 9113 section 6.9 says, as the Framer
// would return them; a stream's window taken past 2^31-1 is that stream's http2.StreamError.
// Reader goroutine.
func (c *conn) readWindowUpdate(fh http2.FrameHeader, side connSide) error {
	if fh.Length != 4 {
		return http2.ConnectionError(http2.ErrCodeFrameSize)
	}
	if _, err := io.ReadFull(c.br, c.wuBuf[:]); err != nil {
		return err
	}
	inc := int64(binary.BigEndian.Uint32(c.wuBuf[:]) & (1<<31 - 1))
	id := fh.StreamID
	if inc == 0 {
		if id == 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == 0 {
		if c.sendWin+inc > maxWindow {
			return connProtocolError{http2.ErrCodeFlowControl, "connection send window over 2^31-1"} // section 6.9.1
		}
		c.sendWin += inc
		c.cond.Broadcast()
		return nil
	}
	win, err := side.sendWindowLocked(id)
	switch {
	case win == nil:
		return err
	case *win+inc > maxWindow:
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl, Cause: errWindowOverflow}
	}
	*win += inc
	c.cond.Broadcast()
	return nil
}

// sendStream is a stream as the send windows see it; its methods are called with c.mu held.
type sendStream interface {
	// sendWindowPtr is the stream's send window.
	sendWindowPtr() *int64
	// sendStopLocked is why the stream may send no more, nil while it may.
	sendStopLocked() error
}

// reserveLocked waits until s may send and takes up to want bytes (want > 0; at most
// sendBatch) of the stream's and the connection's send windows; c.mu is held. The batch bound
// lets other streams' frames and the reader's control frames in between the turns of a large
// message.
func (c *conn) reserveLocked(s sendStream, want int) (int, error) {
	for {
		if err := s.sendStopLocked(); err != nil {
			return 0, err
		}
		if win := s.sendWindowPtr(); *win > 0 && c.sendWin > 0 {
			n := min(int64(want), *win, c.sendWin, c.sendBatch)
			*win -= n
			c.sendWin -= n
			return int(n), nil
		}
		c.cond.Wait()
	}
}

// wake makes goroutines waiting on c.cond look again.
func (c *conn) wake() {
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
}
