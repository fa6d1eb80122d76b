package h2grpc

import (
	"errors"

	"golang.org/x/net/http2"
)

// Causes of the stream errors the server's dataReceiver returns.
var (
	errDataOnClosed  = errors.New("DATA on a closed stream")
	errContentLength = errors.New("DATA disagrees with the request's content-length")
)

// recv and peerEnded make ServerStream the core's receiver (core_recv.go): the request data
// goes to the handler's RecvMsg through s.in.
func (s *ServerStream) recv() *recvStream { return &s.in }

func (s *ServerStream) peerEnded() { s.in.end(nil) }

// dataReceiver is the stream a DATA frame is for (connSide). A stream answered before any
// handler has its body counted against its content-length and dropped; DATA on a closed
// stream (reset by either side, or ended) is a STREAM_CLOSED stream error (RFC 9113 section
// 5.1), as from Go's HTTP/2 server; on an idle stream a connection error.
func (sc *serverConn) dataReceiver(fh http2.FrameHeader, dataLen int) (receiver, error) {
	id := fh.StreamID
	if s := sc.stream(id); s != nil {
		return s, nil
	}
	if sc.idle(id) {
		return nil, connProtocolError{http2.ErrCodeProtocol, "DATA on an idle stream"} // section 5.1
	}
	a := sc.answered[id]
	if a == nil {
		return nil, http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed, Cause: errDataOnClosed}
	}
	a.got += int64(dataLen)
	end := fh.Flags.Has(http2.FlagDataEndStream)
	if a.contentLen >= 0 && (a.got > a.contentLen || end && a.got != a.contentLen) {
		delete(sc.answered, id)
		return nil, http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol, Cause: errContentLength} // section 8.1.1
	}
	if end {
		delete(sc.answered, id)
	}
	return nil, nil
}
