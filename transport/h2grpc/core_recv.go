package h2grpc

import (
	"errors"
	"io"

	"golang.org/x/net/http2"

	"github.com/wingman-mesh/wingman/internal/rawpool"
)

// The receive path, one for both sides: the core reads every DATA frame (readData), counts it
// against the connection's and the stream's receive windows, and queues its data on the
// stream's recvStream (core_recvstream.go); a side only says which stream a frame is for
// (connSide.dataReceiver) and what END_STREAM on DATA means to it (receiver.peerEnded).
//
// Window policy, the same on both sides:
//   - the connection window is granted back as DATA arrives, once a quarter of it is owed;
//   - a stream's window is granted back as its receiver reads, once half of it is owed (grpc-go:
//     a quarter; recvWindow says why half);
//     padding, which nobody reads, counts as read on arrival (RFC 9113 section 6.1).
//
// RFC 9113 leaves when and how much to grant to the receiver (section 5.2.1; section 5.2.2 on its
// appropriate use: protecting a receiver's resources). This is grpc-go's rule, for its client and
// server alike (google.golang.org/grpc v1.85.0, internal/transport http2_client.go and
// http2_server.go handleData: the transport's inflow onData on arrival, a stream's onRead when the
// application reads), which it gives as preventing "other active(fast) streams from starving in
// presence of slow or inactive streams": one stalled stream cannot hold the connection window all
// the others need. It is also what Istio's agent did on both of the connections this package
// replaces (grpc-go's client to Istiod, grpc-go's server for Envoy's xDS:
// pkg/istio-agent/xds_proxy.go at 1.29.6, grpc.DialContext and grpc.NewServer). Both sides here
// multiplex streams whose readers are independent (the client carries every Envoy stream the proxy
// sends upstream on one connection to Istiod; the server, an Envoy's xDS and SDS streams), so
// neither needs x/net's rule (golang.org/x/net v0.60.0 http2: the connection window too granted on
// read), under which a slow Envoy stalls the others once its unread data fills the connection
// window. The price: what is buffered unread on a connection is bounded by StreamWindow per open
// stream (the server's MaxConcurrentStreams, the client's own streams), no longer by ConnWindow.

// receiver is a stream as the receive path sees it: a client's *h2stream, a server's
// *ServerStream.
type receiver interface {
	// recv is the stream's receive side.
	recv() *recvStream
	// peerEnded acts on END_STREAM on a DATA frame, after its data is queued. Reader goroutine.
	peerEnded()
}

// Causes of the stream errors readData returns for a frame the stream cannot take.
var (
	errDataAfterEnd     = errors.New("DATA after the end of the stream")
	errOverStreamWindow = errors.New("DATA beyond the stream window")
)

// readData reads a DATA frame after its header (RFC 9113 section 6.1): its data goes from the
// read buffer into a pooled buffer the stream's receiver takes (readPayload), the only copy;
// padding is checked and skipped and counts in flow control. A frame for no stream is read and
// dropped; one the stream cannot take is an http2.StreamError once read. Reader goroutine.
func (c *conn) readData(fh http2.FrameHeader, side connSide) error {
	dataLen, pad, err := c.readDataStart(fh)
	if err != nil {
		return err
	}
	c.grantConnWindow(int64(fh.Length))
	r, err := side.dataReceiver(fh, dataLen)
	if r == nil {
		if _, stream := err.(http2.StreamError); err != nil && !stream {
			return err // a connection error: the rest of the connection is not read
		}
		if _, derr := c.br.Discard(dataLen + pad); derr != nil {
			return derr
		}
		return err
	}
	var bp *[]byte
	if dataLen > 0 {
		if bp, err = c.readPayload(dataLen); err != nil {
			return err
		}
	}
	if _, err := c.br.Discard(pad); err != nil {
		if bp != nil {
			rawpool.Default.Put(bp)
		}
		return err
	}
	rs := r.recv()
	var grant int64
	rs.mu.Lock()
	switch {
	case rs.eof:
		err = http2.StreamError{StreamID: fh.StreamID, Code: http2.ErrCodeStreamClosed, Cause: errDataAfterEnd} // section 5.1
	case !rs.win.take(int64(fh.Length)):
		err = http2.StreamError{StreamID: fh.StreamID, Code: http2.ErrCodeFlowControl, Cause: errOverStreamWindow} // section 6.9.1
	default:
		if bp != nil && rs.err == nil { // else the receiver has gone: dropped
			rs.chunks = append(rs.chunks, bp)
			bp = nil
			rs.cond.Broadcast()
		}
		grant = rs.win.consumed(int64(fh.Length)-int64(dataLen), rs.overLocked()) // the padding
	}
	rs.mu.Unlock()
	if bp != nil {
		rawpool.Default.Put(bp)
	}
	if err != nil {
		return err
	}
	if grant > 0 {
		c.writeWindowUpdate(fh.StreamID, uint32(grant))
	}
	if fh.Flags.Has(http2.FlagDataEndStream) {
		r.peerEnded()
	}
	return nil
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
	if int64(fh.Length) > c.recvWin {
		return 0, 0, connProtocolError{http2.ErrCodeFlowControl, "DATA beyond the connection window"}
	}
	c.recvWin -= int64(fh.Length)
	return dataLen, pad, nil
}

// grantConnWindow counts n bytes of DATA arrived and grants them back to the peer once a
// quarter of the connection window is owed (the policy above). Reader goroutine.
func (c *conn) grantConnWindow(n int64) {
	if n == 0 {
		return
	}
	c.recvUnacked += n
	if c.recvUnacked >= c.recvWindow/4 {
		c.recvWin += c.recvUnacked
		// As the reader's other answers: while frames wait in the read buffer the flush is
		// left to the reader's next turn, so the grant shares a write with what follows.
		c.lockWrite()
		if c.werr == nil {
			c.note(c.fr.WriteWindowUpdate(0, uint32(c.recvUnacked)))
		}
		c.unlockWriteReader()
		c.recvUnacked = 0
	}
}

// readPayload reads n bytes of a DATA payload from the read buffer into a buffer of
// internal/rawpool, which the stream's reader takes: the only copy (x/net's Framer would first
// copy it into its own frame buffer). The buffer is filled whole before anyone reads it, so it
// comes uncleared (gRPC's default pool clears each one: 3 % of the binary's CPU on 4 MB pushes).
// Reader goroutine.
func (c *conn) readPayload(n int) (*[]byte, error) {
	bp := rawpool.Default.Get(n)
	if _, err := io.ReadFull(c.br, *bp); err != nil {
		rawpool.Default.Put(bp)
		return nil, err
	}
	return bp, nil
}
