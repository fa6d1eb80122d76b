package h2grpc

import (
	"errors"
	"fmt"

	"golang.org/x/net/http2"
)

// connSide is what the connection core needs of the side that embeds it, for the settings,
// the send windows of its streams and the streams DATA is for. Its Locked methods are called
// with c.mu held.
type connSide interface {
	// shiftSendWindowsLocked adds delta to the send window of every stream the peer may still
	// grant window to (RFC 9113 section 6.9.2: a window may go negative) and returns the ID of
	// one it took past 2^31-1, 0 when none.
	shiftSendWindowsLocked(delta int64) (over uint32)
	// sendWindowLocked is the send window of stream id: nil for a closed stream (a
	// WINDOW_UPDATE for it is ignored: the peer may not know yet), with an error for a stream
	// the peer may not name.
	sendWindowLocked(id uint32) (*int64, error)
	// settingLocked acts on a valid setting the core does not keep.
	settingLocked(st http2.Setting)
	// dataReceiver is the stream a DATA frame is for (dataLen: its data, padding excluded),
	// for the core's readData (core_recv.go). nil: the frame is read and dropped, and the error,
	// if any, is why: an http2.StreamError resets the stream once the frame is read, any other
	// ends the connection. Reader goroutine.
	dataReceiver(fh http2.FrameHeader, dataLen int) (receiver, error)
}

// onSettings applies the peer's SETTINGS and acknowledges them (RFC 9113 section 6.5.3); a
// SETTINGS ACK needs nothing. Reader goroutine.
func (c *conn) onSettings(f *http2.SettingsFrame, side connSide) error {
	if f.IsAck() {
		return nil
	}
	var tableSize uint32
	hasTable := false
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				return connProtocolError{http2.ErrCode(ce), fmt.Sprintf("bad setting %v", st)}
			}
			return connProtocolError{http2.ErrCodeProtocol, fmt.Sprintf("bad setting %v", st)}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		switch st.ID {
		case http2.SettingInitialWindowSize:
			// Section 6.9.2: the change applies to every open stream's send window, which may
			// become negative; one taken past 2^31-1 is a connection FLOW_CONTROL_ERROR.
			delta := int64(st.Val) - c.peerWin
			c.peerWin = int64(st.Val)
			over := side.shiftSendWindowsLocked(delta)
			c.cond.Broadcast()
			if over != 0 {
				return connProtocolError{http2.ErrCodeFlowControl, fmt.Sprintf("INITIAL_WINDOW_SIZE %d takes stream %d's window over 2^31-1", st.Val, over)}
			}
		case http2.SettingMaxFrameSize:
			c.maxFrame.Store(st.Val)
		case http2.SettingHeaderTableSize:
			tableSize, hasTable = st.Val, true
		default:
			side.settingLocked(st)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.lockWrite()
	if hasTable {
		c.enc.SetMaxDynamicTableSizeLimit(tableSize)
	}
	if c.werr == nil {
		c.note(c.fr.WriteSettingsAck())
	}
	c.unlockWriteReader()
	return nil
}

// shiftWindowLocked adds delta to a stream's send window and reports whether it went past
// 2^31-1 (for connSide.shiftSendWindowsLocked).
func shiftWindowLocked(win *int64, delta int64) (over bool) {
	*win += delta
	return *win > maxWindow
}
