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
// and a peer sends one per quarter window. Errors as RFC 9113 section 6.9 says, as the Framer
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

// readDataStart reads a DATA frame's pad length after its header (RFC 9113 section 6.1) and
// counts the whole frame against the connection's receive window (section 6.9). It returns
// the data's length; pad bytes of padding follow the data. Reader goroutine.
func (c *conn) readDataStart(fh http2.FrameHeader) (dataLen, pad int, err error) {
	if fh.StreamID == 0 {
		return 0, 0, connProtocolError{http2.ErrCodeProtocol, "DATA on stream 0"}
	}
	dataLen = int(fh.Length)
	if fh.Flags.Has(http2.FlagDataPadded) {
		if fh.Length == 0 {
			return 0, 0, connProtocolError{http2.ErrCodeProtocol, "padded DATA without its pad length"}
		}
		p, err := c.br.ReadByte()
		if err != nil {
			return 0, 0, err
		}
		pad = int(p)
		if pad >= dataLen {
			return 0, 0, connProtocolError{http2.ErrCodeProtocol, "DATA padding longer than the frame"}
		}
		dataLen -= 1 + pad
	}
	if c.recvWin.Add(-int64(fh.Length)) < 0 {
		return 0, 0, connProtocolError{http2.ErrCodeFlowControl, "DATA beyond the connection window"}
	}
	return dataLen, pad, nil
}

// consumed counts n received bytes as consumed and grants them back to the peer once a quarter
// of the connection window is owed.
func (c *conn) consumed(n int64) {
	if n <= 0 {
		return
	}
	if v := c.recvUnacked.Add(n); v >= c.recvWindow/4 {
		if c.recvUnacked.CompareAndSwap(v, 0) {
			c.recvWin.Add(v)
			c.writeWindowUpdate(0, uint32(v))
		}
	}
}

// recvWindow is a stream's receive window, guarded by its stream's lock: what the peer may
// still send on the stream, and what was consumed and not yet granted back, granted with one
// WINDOW_UPDATE once a quarter of the window is owed (as grpc-go).
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
// returns the increment to grant now, 0 while less than a quarter of the window is owed or
// once the peer has ended the stream (ended).
func (w *recvWindow) consumed(n int64, ended bool) int64 {
	if ended {
		return 0
	}
	w.unacked += n
	if w.unacked < w.size/4 {
		return 0
	}
	grant := w.unacked
	w.unacked = 0
	w.win += grant
	return grant
}
