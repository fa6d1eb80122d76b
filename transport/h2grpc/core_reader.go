package h2grpc

import (
	"errors"
	"fmt"

	"golang.org/x/net/http2"
)

// readFrame reads the next frame for the connection's one reader goroutine. The first frame
// must be the peer's SETTINGS, not an ACK (RFC 9113 section 3.4: the preface's SETTINGS is
// the first frame either side sends after the client's magic); WINDOW_UPDATE is applied here
// and DATA read by readData (core_recv.go), both read without the Framer, which returns nil for them;
// every other frame is the Framer's. Errors: connProtocolError ends the connection (GOAWAY
// with its code), http2.StreamError resets a stream, anything else is the connection's I/O.
// Before it waits for bytes it flushes what the reader's answers left (unlockWriteReader).
func (c *conn) readFrame(first bool, side connSide) (http2.Frame, error) {
	c.flushUnflushed()
	fh, err := c.fr.ReadFrameHeader()
	if err != nil {
		return nil, c.connError(err) // over our SETTINGS_MAX_FRAME_SIZE, or I/O
	}
	if first && (fh.Type != http2.FrameSettings || fh.Flags.Has(http2.FlagSettingsAck)) {
		return nil, connProtocolError{http2.ErrCodeProtocol, fmt.Sprintf("first frame is %v, not the peer's SETTINGS", fh.Type)}
	}
	c.frameReceived()
	var f http2.Frame
	switch fh.Type {
	case http2.FrameData:
		err = c.readData(fh, side)
	case http2.FrameWindowUpdate:
		err = c.readWindowUpdate(fh, side)
	default:
		f, err = c.fr.ReadFrameForHeader(fh)
	}
	if err != nil {
		err = c.connError(err)
	}
	return f, err
}

// connError turns the Framer's connection errors into connProtocolError (out of readFrame:
// errors.As makes its target escape, an allocation per frame).
func (c *conn) connError(err error) error {
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		why := "malformed frame"
		if d := c.fr.ErrorDetail(); d != nil {
			why += ": " + d.Error()
		}
		return connProtocolError{http2.ErrCode(ce), why}
	case errors.Is(err, http2.ErrFrameTooLarge):
		return connProtocolError{http2.ErrCodeFrameSize, "frame larger than 16384 bytes"} // section 4.2
	}
	return err
}
