package h2grpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// clientSendBatch is the most one stream sends per turn under the writer: a write buffer
// (connbuf.go), so other streams' frames get in between.
const clientSendBatch = bigBufSize

// clientConn is one HTTP/2 connection of a Client: the frames of every stream are written
// through the connection core's writer (core_writer.go) and read by one reader goroutine.
type clientConn struct {
	conn               // the writer, settings, windows and keepalive shared with the server
	cfg  *ClientConfig // the Client's; read only

	wg        sync.WaitGroup // the reader and the keepalive goroutines
	done      chan struct{}  // closed when the reader has ended and every stream has failed
	closeOnce sync.Once

	// guarded by conn.mu; conn.cond also signals stream slots and death
	streams    map[uint32]*h2stream
	nextID     uint32
	active     int // streams holding a slot of MAX_CONCURRENT_STREAMS
	maxStreams uint32
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
		done:       make(chan struct{}),
		streams:    make(map[uint32]*h2stream),
		nextID:     1,
		maxStreams: math.MaxUint32,
	}
	cc.initConn(nc, cfg.ConnWindow, clientSendBatch, 0, func(err error) {
		cc.close(status.Errorf(codes.Unavailable, "h2grpc: write to %s: %v", cfg.Address, err))
	})

	// The preface, our SETTINGS (no push; the stream window) and the connection window.
	_, err = cc.bw.WriteString(http2.ClientPreface)
	if err == nil {
		cc.writeSettingsLocked(
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(cfg.StreamWindow)},
		)
		if err = cc.werr; err == nil {
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
		go cc.runKeepalive()
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
		s.in.end(err)
	}
}

// errConnLost is how a stream learns its connection ended under it.
func errConnLost(addr string, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Unavailable, "h2grpc: connection to %s lost: %v", addr, err)
}

func (cc *clientConn) goAway(e connProtocolError) {
	cc.writeGoAway(0, e.code, []byte(e.why))
}

// keepalive pings after KeepaliveTime without a frame received and closes the connection
// when the ping is not answered within KeepaliveTimeout (net/http's SendPingTimeout and
// PingTimeout, which this replaces), with the pinger the server runs too (keepalive.go).
func (cc *clientConn) runKeepalive() {
	defer cc.wg.Done()
	timeout := cc.cfg.KeepaliveTimeout
	if timeout == 0 {
		timeout = defaultPingTimeout
	}
	cc.keepalive(cc.cfg.KeepaliveTime, timeout, cc.done, func() {
		cc.close(status.Errorf(codes.Unavailable, "h2grpc: keepalive ping to %s not answered within %v", cc.cfg.Address, timeout))
	})
}

var errGoAwayRefused = errors.New("stream refused: the server is going away")
