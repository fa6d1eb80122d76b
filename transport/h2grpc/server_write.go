package h2grpc

import (
	"strconv"

	"google.golang.org/grpc/status"
)

// encodeStatus adds grpc-status and grpc-message (percent-encoded) to the block; under wmu.
func (sc *serverConn) encodeStatus(st *status.Status) {
	sc.encodeField("grpc-status", strconv.Itoa(int(st.Code())))
	if msg := st.Message(); msg != "" {
		sc.encodeField("grpc-message", encodeGrpcMessage(msg))
	}
}

// writeResponseHeaders writes a response's HEADERS (status 200, gRPC content-type); under wmu.
func (sc *serverConn) writeResponseHeaders(id uint32) {
	sc.hbuf.Reset()
	sc.encodeField(":status", "200")
	sc.encodeField("content-type", "application/grpc")
	sc.writeHeaderBlockLocked(id, false)
}

// writeEarlyAbort answers a stream that never reaches a handler: a trailers-only response
// with the given HTTP status, as grpc-go's writeEarlyAbort. A request not yet complete stays
// half-closed (local) in sc.answered: its frames are checked and discarded as x/net's server
// does while its handler drains a body (grpc-go resets it with NO_ERROR instead, after which
// RFC 9113 section 5.4.2 has the peer's frames ignored unchecked). Reader goroutine only.
func (sc *serverConn) writeEarlyAbort(id uint32, httpStatus int, st *status.Status, requestEnded bool, contentLen int64) {
	sc.lockWrite()
	sc.hbuf.Reset()
	sc.encodeField(":status", strconv.Itoa(httpStatus))
	sc.encodeField("content-type", "application/grpc")
	sc.encodeStatus(st)
	sc.writeHeaderBlockLocked(id, true)
	sc.unlockWrite()
	if !requestEnded {
		sc.mu.Lock()
		win := sc.peerWin
		sc.mu.Unlock()
		sc.answered[id] = &answeredStream{sendWin: win, contentLen: contentLen}
	}
}
