package h2grpc

import (
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/status"
)

// All frames of a server connection go through one connWriter (connbuf.go) under wmu. The
// goroutine that leaves the lock flushes when no other is waiting for it: writers queued behind each other
// share one write system call, and the last one out always flushes, so nothing stays behind
// in the buffer. A write returns once its bytes are in the buffer and (by itself or the next
// writer) on their way to the socket.

// lockWrite takes the connection's writer.
// With keepalive on, the writes that follow have a deadline of KeepaliveTime +
// KeepaliveTimeout: a client that stops reading fails them instead of holding the writer.
func (sc *serverConn) lockWrite() {
	sc.waiters.Add(1)
	sc.wmu.Lock()
	sc.waiters.Add(-1)
	if d := sc.writeTimeout; d > 0 {
		sc.nc.SetWriteDeadline(time.Now().Add(d))
	}
}

// unlockWrite flushes unless another writer is waiting, and releases the writer. It returns
// the connection's write error: after one, the connection is closed (its reader then ends it).
func (sc *serverConn) unlockWrite() error {
	if sc.werr == nil && sc.waiters.Load() == 0 && sc.bw.Buffered() > 0 {
		sc.werr = sc.bw.Flush()
	}
	err := sc.werr
	sc.wmu.Unlock()
	if err != nil {
		sc.nc.Close()
	}
	return err
}

// noteWrite keeps the first write error of a frame written under wmu.
func (sc *serverConn) noteWrite(err error) {
	if err != nil && sc.werr == nil {
		sc.werr = err
	}
}

// encodeField adds a header field to the block in hbuf; under wmu.
func (sc *serverConn) encodeField(name, value string) {
	// hpack.Encoder writes into a bytes.Buffer, which cannot fail.
	_ = sc.henc.WriteField(hpack.HeaderField{Name: name, Value: value})
}

// encodeStatus adds grpc-status and grpc-message (percent-encoded) to the block; under wmu.
func (sc *serverConn) encodeStatus(st *status.Status) {
	sc.encodeField("grpc-status", strconv.Itoa(int(st.Code())))
	if msg := st.Message(); msg != "" {
		sc.encodeField("grpc-message", encodeGrpcMessage(msg))
	}
}

// writeHeaderBlock writes the block in hbuf as HEADERS and as many CONTINUATION frames as
// the peer's MAX_FRAME_SIZE needs; under wmu.
func (sc *serverConn) writeHeaderBlock(id uint32, endStream bool) {
	block := sc.hbuf.Bytes()
	limit := int(sc.peerMaxFrame.Load())
	for first := true; first || len(block) > 0; first = false {
		chunk := block
		if len(chunk) > limit {
			chunk = chunk[:limit]
		}
		block = block[len(chunk):]
		if first {
			sc.sentStreamFrame.Store(true)
			sc.noteWrite(sc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: chunk, EndStream: endStream, EndHeaders: len(block) == 0}))
		} else {
			sc.noteWrite(sc.fr.WriteContinuation(id, len(block) == 0, chunk))
		}
	}
	sc.hbuf.Reset()
}

// writeResponseHeaders writes a response's HEADERS (status 200, gRPC content-type); under wmu.
func (sc *serverConn) writeResponseHeaders(id uint32) {
	sc.hbuf.Reset()
	sc.encodeField(":status", "200")
	sc.encodeField("content-type", "application/grpc")
	sc.writeHeaderBlock(id, false)
}

// writeData writes DATA frames of n bytes taken from the front of pieces, no frame over the
// peer's MAX_FRAME_SIZE, and returns what is left of pieces; under wmu. The frame header is
// written by hand and the payload straight from the caller's buffers into the connection's
// buffer (or the socket, for a large piece): no copy into a frame buffer.
func (sc *serverConn) writeData(id uint32, pieces [][]byte, n int) [][]byte {
	limit := int(sc.peerMaxFrame.Load())
	sc.sentStreamFrame.Store(true)
	for n > 0 {
		size := min(n, limit)
		h := &sc.dataHdr
		h[0], h[1], h[2] = byte(size>>16), byte(size>>8), byte(size)
		h[3] = byte(http2.FrameData)
		h[4] = 0
		h[5], h[6], h[7], h[8] = byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id)
		_, err := sc.bw.Write(h[:])
		sc.noteWrite(err)
		n -= size
		for size > 0 {
			p := pieces[0]
			if len(p) > size {
				_, err = sc.bw.Write(p[:size])
				pieces[0] = p[size:]
				size = 0
			} else {
				_, err = sc.bw.Write(p)
				pieces = pieces[1:]
				size -= len(p)
			}
			sc.noteWrite(err)
		}
	}
	return pieces
}

// writeWindowUpdate grants n more bytes on a stream (id 0: the connection).
func (sc *serverConn) writeWindowUpdate(id uint32, n int64) {
	sc.lockWrite()
	sc.noteWrite(sc.fr.WriteWindowUpdate(id, uint32(n)))
	sc.unlockWrite()
}

// writeReset resets a stream.
func (sc *serverConn) writeReset(id uint32, code http2.ErrCode) {
	sc.lockWrite()
	sc.noteWrite(sc.fr.WriteRSTStream(id, code))
	sc.unlockWrite()
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
	sc.writeHeaderBlock(id, true)
	sc.unlockWrite()
	if !requestEnded {
		sc.mu.Lock()
		win := sc.peerInitWin
		sc.mu.Unlock()
		sc.answered[id] = &answeredStream{sendWin: win, contentLen: contentLen}
	}
}
