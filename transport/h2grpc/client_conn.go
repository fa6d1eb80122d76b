package h2grpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// connBufferSize is the read and the write buffer of a client connection while data flows
// (connbuf.go). Reading through 64 KiB takes four 16 KiB DATA frames or more per system call
// when they are waiting (net/http read through 4 KiB, which a DATA payload bypasses: two calls
// per frame); writing through it puts a message's frames and the small frames of other streams
// into one call.
const connBufferSize = bigBufSize

// Protocol constants of RFC 9113 (section 6.5.2 defaults, 6.9.1 window limit).
const (
	initialPeerWindow    = 65535
	initialPeerFrameSize = 16384
	defaultHeaderTable   = 4096
	maxWindow            = math.MaxInt32
	// defaultPingTimeout is net/http's HTTP2Config.PingTimeout default, kept for
	// KeepaliveTimeout 0.
	defaultPingTimeout = 15 * time.Second
)

// clientConn is one HTTP/2 connection of a Client: the frames of every stream are written
// through one buffered writer under wmu (the last writer out flushes) and read by one reader
// goroutine.
type clientConn struct {
	cfg *ClientConfig // the Client's; read only
	nc  net.Conn

	wg   sync.WaitGroup // the reader and the keepalive goroutines
	done chan struct{}  // closed when the reader has ended and every stream has failed

	// Write side: wmu guards the Framer's write half, bw, enc and hbuf.
	wmu     sync.Mutex
	waiting atomic.Int32 // writers waiting for wmu: the last one out flushes
	bw      *connWriter
	fr      *http2.Framer // its read half belongs to the reader goroutine
	br      *connReader   // the Framer's reader, which the reader goroutine reads DATA from
	enc     *hpack.Encoder
	hbuf    bytes.Buffer
	werr    error // sticky write error
	fhdr    [9]byte

	// Receive side of the connection window: what the server may still send; granted back
	// by readers (consumed) and taken by the reader goroutine.
	recvWin   atomic.Int64
	unacked   atomic.Int64 // consumed, not yet granted
	lastRead  atomic.Int64 // Unix nanoseconds of the last frame received (keepalive.go)
	unflushed atomic.Bool  // the reader left frames in bw for its next turn to flush
	pingAck   chan struct{}
	closeOnce sync.Once

	mu         sync.Mutex // guards the fields below
	cond       *sync.Cond // on mu: send windows, stream slots, death
	streams    map[uint32]*h2stream
	nextID     uint32
	active     int // streams holding a slot of MAX_CONCURRENT_STREAMS
	maxStreams uint32
	sendWin    int64 // connection send window
	peerWin    int64 // the server's INITIAL_WINDOW_SIZE
	frameSize  int   // the server's MAX_FRAME_SIZE
	goaway     bool  // no new streams: GOAWAY received or stream IDs used up
	dead       error // set once the connection is lost; streams fail with it
	closeErr   error // why we closed the connection, when we did
}

// dialConn makes the connection: dial, TLS with ALPN h2 when configured, the client preface
// and our SETTINGS; it starts the reader (and the keepalive pinger) without waiting for the
// server's SETTINGS, as HTTP/2 allows.
func dialConn(ctx context.Context, cfg *ClientConfig, tc *tls.Config) (*clientConn, error) {
	var nc net.Conn
	var err error
	if cfg.Dial != nil {
		nc, err = cfg.Dial(ctx)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", cfg.Address)
	}
	if err != nil {
		return nil, err
	}
	if tc != nil {
		tconn := tls.Client(nc, tc)
		if err := tconn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		if p := tconn.ConnectionState().NegotiatedProtocol; p != "h2" {
			nc.Close()
			return nil, fmt.Errorf("server did not negotiate HTTP/2 (ALPN %q)", p)
		}
		nc = tconn
	}
	cc := &clientConn{
		cfg:        cfg,
		nc:         nc,
		done:       make(chan struct{}),
		bw:         newConnWriter(nc),
		pingAck:    make(chan struct{}, 1),
		streams:    make(map[uint32]*h2stream),
		nextID:     1,
		maxStreams: math.MaxUint32,
		sendWin:    initialPeerWindow,
		peerWin:    initialPeerWindow,
		frameSize:  initialPeerFrameSize,
	}
	cc.cond = sync.NewCond(&cc.mu)
	cc.br = newConnReader(nc)
	cc.fr = http2.NewFramer(cc.bw, cc.br)
	cc.fr.SetReuseFrames()
	// We do not raise SETTINGS_MAX_FRAME_SIZE: a larger frame is a FRAME_SIZE_ERROR.
	cc.fr.SetMaxReadFrameSize(initialPeerFrameSize)
	cc.fr.ReadMetaHeaders = hpack.NewDecoder(defaultHeaderTable, nil)
	cc.enc = hpack.NewEncoder(&cc.hbuf)
	cc.recvWin.Store(int64(cfg.ConnWindow))

	// The preface, our SETTINGS (no push; the stream window) and the connection window.
	_, err = cc.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = cc.fr.WriteSettings(
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(cfg.StreamWindow)},
		)
		if err == nil && cfg.ConnWindow > initialPeerWindow {
			err = cc.fr.WriteWindowUpdate(0, uint32(cfg.ConnWindow-initialPeerWindow))
		}
		if err == nil {
			err = cc.bw.Flush()
		}
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	cc.wg.Add(1)
	go cc.readLoop()
	if cfg.KeepaliveTime > 0 {
		cc.wg.Add(1)
		go cc.keepalive()
	}
	return cc, nil
}

// usable reports whether a new stream may start on the connection.
func (cc *clientConn) usable() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.dead == nil && !cc.goaway
}

// close ends the connection (best effort GOAWAY first when no writer holds the connection);
// the reader then fails every stream with why.
func (cc *clientConn) close(why error) {
	cc.closeOnce.Do(func() {
		cc.mu.Lock()
		cc.closeErr = why
		cc.mu.Unlock()
		if cc.wmu.TryLock() {
			if cc.werr == nil {
				cc.nc.SetWriteDeadline(time.Now().Add(time.Second))
				if cc.fr.WriteGoAway(0, http2.ErrCodeNo, nil) == nil {
					cc.bw.Flush()
				}
			}
			cc.werr = net.ErrClosed
			cc.wmu.Unlock()
		}
		cc.nc.Close()
	})
}

// wait waits for the connection's goroutines; call after close.
func (cc *clientConn) wait() { cc.wg.Wait() }

// lockWrite takes the writer; unlockWrite flushes when no other writer waits and releases it.
func (cc *clientConn) lockWrite() {
	cc.waiting.Add(1)
	cc.wmu.Lock()
	cc.waiting.Add(-1)
}

func (cc *clientConn) unlockWrite(err error) error {
	if err != nil && cc.werr == nil {
		cc.werr = err
	}
	if cc.werr == nil && cc.waiting.Load() == 0 {
		cc.werr = cc.bw.Flush()
		cc.unflushed.Store(false)
	}
	err = cc.werr
	cc.wmu.Unlock()
	if err != nil {
		cc.close(status.Errorf(codes.Unavailable, "h2grpc: write to %s: %v", cc.cfg.Address, err))
	}
	return err
}

// unlockWriteReader is unlockWrite for the reader goroutine's answers (PING and SETTINGS
// acknowledgements): while frames already read wait in the read buffer it leaves the flush to
// the reader's next turn (flushUnflushed), so a batch of frames costs one write.
func (cc *clientConn) unlockWriteReader(err error) {
	if err == nil && cc.werr == nil && cc.br.Buffered() > 0 {
		cc.unflushed.Store(true)
		cc.wmu.Unlock()
		return
	}
	cc.unlockWrite(err)
}

// flushUnflushed flushes what unlockWriteReader left, before the reader waits for bytes.
func (cc *clientConn) flushUnflushed() {
	if cc.br.Buffered() == 0 && cc.unflushed.Load() {
		cc.lockWrite()
		cc.unlockWrite(nil)
	}
}

// writeWindowUpdate and writeRST write one small control frame each.
func (cc *clientConn) writeWindowUpdate(id uint32, n uint32) {
	cc.lockWrite()
	var err error
	if cc.werr == nil {
		err = cc.fr.WriteWindowUpdate(id, n)
	}
	cc.unlockWrite(err)
}

func (cc *clientConn) writeRST(id uint32, code http2.ErrCode) {
	cc.lockWrite()
	var err error
	if cc.werr == nil {
		err = cc.fr.WriteRSTStream(id, code)
	}
	cc.unlockWrite(err)
}

// writeDataLocked writes DATA frames carrying n bytes taken from the front of *pieces (which
// it advances), each at most frameSize, with END_STREAM on the last when end. The frame header
// is ours and the payload goes straight into the buffered writer: one copy, no allocation.
func (cc *clientConn) writeDataLocked(id uint32, pieces *[][]byte, n, frameSize int, end bool) error {
	for first := true; first || n > 0; first = false {
		m := min(n, frameSize)
		h := &cc.fhdr
		h[0], h[1], h[2] = byte(m>>16), byte(m>>8), byte(m)
		h[3] = byte(http2.FrameData)
		h[4] = 0
		if end && m == n {
			h[4] = byte(http2.FlagDataEndStream)
		}
		binary.BigEndian.PutUint32(h[5:], id)
		if _, err := cc.bw.Write(h[:]); err != nil {
			return err
		}
		n -= m
		for m > 0 {
			p := (*pieces)[0]
			k := min(len(p), m)
			if _, err := cc.bw.Write(p[:k]); err != nil {
				return err
			}
			m -= k
			if k == len(p) {
				*pieces = (*pieces)[1:]
			} else {
				(*pieces)[0] = p[k:]
			}
		}
	}
	return nil
}

// consumed gives back n bytes of the connection window once a quarter of it is owed.
func (cc *clientConn) consumed(n int64) {
	if n <= 0 {
		return
	}
	if v := cc.unacked.Add(n); v >= int64(cc.cfg.ConnWindow)/4 {
		if cc.unacked.CompareAndSwap(v, 0) {
			cc.recvWin.Add(v)
			cc.writeWindowUpdate(0, uint32(v))
		}
	}
}

// fail marks the connection dead and ends every stream with err.
func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.closeErr != nil {
		err = cc.closeErr
	}
	cc.dead = err
	ss := make([]*h2stream, 0, len(cc.streams))
	for _, s := range cc.streams {
		ss = append(ss, s)
	}
	clear(cc.streams)
	cc.active = 0
	cc.cond.Broadcast()
	cc.mu.Unlock()
	for _, s := range ss {
		s.endRecv(err)
	}
}

// errConnLost is how a stream learns its connection ended under it.
func errConnLost(addr string, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Unavailable, "h2grpc: connection to %s lost: %v", addr, err)
}

// connProtocolError closes the connection for a protocol error of the server: GOAWAY with the
// code, then close.
type connProtocolError struct {
	code http2.ErrCode
	why  string
}

func (e connProtocolError) Error() string { return fmt.Sprintf("%v: %s", e.code, e.why) }

func (cc *clientConn) goAway(e connProtocolError) {
	cc.lockWrite()
	if cc.werr == nil {
		cc.nc.SetWriteDeadline(time.Now().Add(time.Second))
		cc.fr.WriteGoAway(0, e.code, []byte(e.why))
	}
	cc.unlockWrite(nil)
}

// keepalive pings after KeepaliveTime without a frame received and closes the connection
// when the ping is not answered within KeepaliveTimeout (net/http's SendPingTimeout and
// PingTimeout, which this replaces), with the pinger the server runs too (keepalive.go).
func (cc *clientConn) keepalive() {
	defer cc.wg.Done()
	timeout := cc.cfg.KeepaliveTimeout
	if timeout == 0 {
		timeout = defaultPingTimeout
	}
	pinger{
		idle:     cc.cfg.KeepaliveTime,
		timeout:  timeout,
		done:     cc.done,
		lastRead: &cc.lastRead,
		ack:      cc.pingAck,
		ping: func() error {
			cc.lockWrite()
			var err error
			if cc.werr == nil {
				err = cc.fr.WritePing(false, [8]byte{'w', 'i', 'n', 'g', 'm', 'a', 'n', 0})
			}
			return cc.unlockWrite(err)
		},
		expire: func() {
			cc.close(status.Errorf(codes.Unavailable, "h2grpc: keepalive ping to %s not answered within %v", cc.cfg.Address, timeout))
		},
	}.run()
}

var errGoAwayRefused = errors.New("stream refused: the server is going away")
