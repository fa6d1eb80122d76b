package h2grpc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Protocol constants of RFC 9113: the initial window of both directions before SETTINGS and
// the initial SETTINGS_MAX_FRAME_SIZE (section 6.5.2), the HPACK table size before SETTINGS,
// and the largest window (section 6.9.1).
const (
	initialWindow      = 65535
	maxFrameDefault    = 16384
	defaultHeaderTable = 4096
	maxWindow          = math.MaxInt32
	// defaultPingTimeout is net/http's HTTP2Config.PingTimeout default, kept for
	// KeepaliveTimeout 0.
	defaultPingTimeout = 15 * time.Second
)

// conn is the connection core that clientConn and serverConn both embed, so that a fix lands
// once (issue 23): the writer every frame goes through (this file), the frame reader's front
// half (core_reader.go), the peer's settings (core_settings.go), the send windows and the
// wait for them (core_send.go), the receive path: DATA, the receive windows and the streams'
// received data (core_recv.go, core_recvstream.go), and the keepalive (keepalive.go). What
// differs between the sides stays with them: opening streams and GOAWAY (client), the routes,
// the ping policy and the streams answered before any handler (server); each side only finds
// the stream a frame is for.
//
// All frames go through one connWriter (connbuf.go) under wmu. The goroutine that leaves the
// lock flushes when no other is waiting for it: writers queued behind each other share one
// write system call, and the last one out always flushes, so nothing stays in the buffer. A
// write returns once its bytes are in the buffer and (by itself or the next writer) on their
// way to the socket.
type conn struct {
	// immutable after initConn
	nc           net.Conn
	start        time.Time     // the connection began; the keepalive's frame times count from it
	fr           *http2.Framer // its write half under wmu, its read half the reader goroutine's
	br           *connReader   // the Framer's reader; the reader goroutine reads DATA from it
	writeTimeout time.Duration // each write's deadline (lockWrite); 0: none
	sendBatch    int64         // the most one sender takes of the send windows per turn
	recvWindow   int64         // the connection receive window we advertise
	writeFailed  func(error)   // ends the connection after a write failed (called outside wmu)

	// the writer: guarded by wmu
	wmu     sync.Mutex
	waiting atomic.Int32 // writers waiting for wmu: the last one out flushes
	bw      *connWriter
	enc     *hpack.Encoder // writes into hbuf
	hbuf    bytes.Buffer
	fhdr    [9]byte
	werr    error // the first write error: nothing more is written

	// atomic
	unflushed       atomic.Bool   // the reader left frames in bw for its next turn to flush
	maxFrame        atomic.Uint32 // the peer's SETTINGS_MAX_FRAME_SIZE
	lastRead        atomic.Int64  // when the last frame arrived: nanoseconds after start (keepalive.go)
	sentStreamFrame atomic.Bool   // HEADERS or DATA went out since the peer's last PING

	pingAck chan struct{} // the reader -> the keepalive: our PING was answered

	// owned by the reader goroutine
	wuBuf       [4]byte
	recvWin     int64 // the connection receive window: what the peer may still send
	recvUnacked int64 // received bytes not yet granted back (core_recv.go)

	mu      sync.Mutex // guards the fields below, each side's streams and their send windows
	cond    sync.Cond  // on mu: a send window grew, a stream or the connection ended
	sendWin int64      // the connection send window: what we may still send
	peerWin int64      // the peer's SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window
}

// initConn sets the core up on nc. writeFailed ends the connection once a write failed.
func (c *conn) initConn(nc net.Conn, recvWindow int, sendBatch int64, writeTimeout time.Duration, writeFailed func(error)) {
	c.nc = nc
	c.start = time.Now()
	c.br = newConnReader(nc)
	c.bw = newConnWriter(nc)
	c.fr = http2.NewFramer(c.bw, c.br)
	c.fr.SetReuseFrames()
	// We do not raise SETTINGS_MAX_FRAME_SIZE: a larger frame is a FRAME_SIZE_ERROR.
	c.fr.SetMaxReadFrameSize(maxFrameDefault)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(defaultHeaderTable, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.writeTimeout = writeTimeout
	c.sendBatch = sendBatch
	c.recvWindow = int64(recvWindow)
	c.recvWin = int64(recvWindow)
	c.writeFailed = writeFailed
	c.pingAck = make(chan struct{}, 1)
	c.maxFrame.Store(maxFrameDefault)
	c.cond.L = &c.mu
	c.sendWin = initialWindow
	c.peerWin = initialWindow
}

// writeSettingsLocked writes our SETTINGS and grows the connection window to recvWindow;
// under wmu.
func (c *conn) writeSettingsLocked(settings ...http2.Setting) {
	c.note(c.fr.WriteSettings(settings...))
	if grow := c.recvWindow - initialWindow; grow > 0 {
		c.note(c.fr.WriteWindowUpdate(0, uint32(grow)))
	}
}

// lockWrite takes the connection's writer. With a writeTimeout the writes that follow have
// that deadline: a peer that stops reading fails them instead of holding the writer.
func (c *conn) lockWrite() {
	c.waiting.Add(1)
	c.wmu.Lock()
	c.waiting.Add(-1)
	if d := c.writeTimeout; d > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(d))
	}
}

// note keeps the first write error of a frame written under wmu.
func (c *conn) note(err error) {
	if err != nil && c.werr == nil {
		c.werr = err
	}
}

// unlockWrite flushes unless another writer is waiting, and releases the writer. It returns
// the connection's write error: after one, writeFailed ends the connection.
func (c *conn) unlockWrite() error {
	if c.werr == nil && c.waiting.Load() == 0 {
		c.werr = c.bw.Flush()
		c.unflushed.Store(false)
	}
	err := c.werr
	c.wmu.Unlock()
	if err != nil {
		c.writeFailed(err)
	}
	return err
}

// unlockWriteReader is unlockWrite for the reader goroutine's answers (PING and SETTINGS
// acknowledgements): while frames already read wait in the read buffer it leaves the flush to
// the reader's next turn (flushUnflushed), so a batch of frames costs one write.
func (c *conn) unlockWriteReader() {
	if c.werr == nil && c.br.Buffered() > 0 {
		c.unflushed.Store(true)
		c.wmu.Unlock()
		return
	}
	c.unlockWrite()
}

// flushUnflushed flushes what unlockWriteReader left; the reader calls it before it waits for
// bytes.
func (c *conn) flushUnflushed() {
	if c.br.Buffered() == 0 && c.unflushed.Load() {
		c.lockWrite()
		c.unlockWrite()
	}
}

// writeWindowUpdate grants n more bytes on a stream (id 0: the connection).
func (c *conn) writeWindowUpdate(id uint32, n uint32) {
	c.lockWrite()
	if c.werr == nil {
		c.note(c.fr.WriteWindowUpdate(id, n))
	}
	c.unlockWrite()
}

// writeRST resets a stream.
func (c *conn) writeRST(id uint32, code http2.ErrCode) {
	c.lockWrite()
	if c.werr == nil {
		c.note(c.fr.WriteRSTStream(id, code))
	}
	c.unlockWrite()
}

// writeGoAway tells the peer the connection ends; the caller then closes it. The write has
// a deadline of its own: a peer that does not read must not hold the writer.
func (c *conn) writeGoAway(lastStream uint32, code http2.ErrCode, debug []byte) {
	c.lockWrite()
	if c.werr == nil {
		c.nc.SetWriteDeadline(time.Now().Add(time.Second))
		c.note(c.fr.WriteGoAway(lastStream, code, debug))
	}
	c.unlockWrite()
}

// encodeField adds a header field to the block in hbuf; under wmu.
func (c *conn) encodeField(name, value string) {
	// hpack.Encoder writes into a bytes.Buffer, which cannot fail.
	_ = c.enc.WriteField(hpack.HeaderField{Name: name, Value: value})
}

// writeHeaderBlockLocked writes the block in hbuf as HEADERS and as many CONTINUATION frames
// as the peer's MAX_FRAME_SIZE needs, then empties hbuf; under wmu.
func (c *conn) writeHeaderBlockLocked(id uint32, endStream bool) {
	block := c.hbuf.Bytes()
	limit := int(c.maxFrame.Load())
	for first := true; c.werr == nil && (first || len(block) > 0); first = false {
		chunk := block[:min(len(block), limit)]
		block = block[len(chunk):]
		if first {
			c.sentStreamFrame.Store(true)
			c.note(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: chunk, EndStream: endStream, EndHeaders: len(block) == 0}))
		} else {
			c.note(c.fr.WriteContinuation(id, len(block) == 0, chunk))
		}
	}
	c.hbuf.Reset()
}

// writeDataLocked writes DATA frames carrying n bytes taken from the front of pieces, none
// over the peer's MAX_FRAME_SIZE, END_STREAM on the last when end (an empty frame when n is
// 0), and returns what is left of pieces; under wmu. The frame header is ours and the payload
// goes straight from the caller's buffers into the connection's buffer (or the socket, for a
// large piece): one copy, no allocation.
func (c *conn) writeDataLocked(id uint32, pieces [][]byte, n int, end bool) [][]byte {
	limit := int(c.maxFrame.Load())
	c.sentStreamFrame.Store(true)
	for first := true; c.werr == nil && (first || n > 0); first = false {
		size := min(n, limit)
		h := &c.fhdr
		h[0], h[1], h[2] = byte(size>>16), byte(size>>8), byte(size)
		h[3] = byte(http2.FrameData)
		h[4] = 0
		if end && size == n {
			h[4] = byte(http2.FlagDataEndStream)
		}
		binary.BigEndian.PutUint32(h[5:], id&(1<<31-1))
		_, err := c.bw.Write(h[:])
		c.note(err)
		n -= size
		for size > 0 && c.werr == nil {
			p := pieces[0]
			k := min(len(p), size)
			_, err = c.bw.Write(p[:k])
			c.note(err)
			size -= k
			if k == len(p) {
				pieces = pieces[1:]
			} else {
				pieces[0] = p[k:]
			}
		}
	}
	return pieces
}

// connProtocolError ends the connection for a protocol error of the peer: GOAWAY with the
// code, then close.
type connProtocolError struct {
	code http2.ErrCode
	why  string
}

func (e connProtocolError) Error() string { return fmt.Sprintf("%v: %s", e.code, e.why) }
