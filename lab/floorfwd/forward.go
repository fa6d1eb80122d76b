package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// upstream is where each Envoy connection is carried to. Immutable.
type upstream struct {
	addr  string
	tls   *tls.Config
	extra metaFlag // request headers added to every stream
}

// Windows the forwarder grants: the control plane may send 4 MiB on a stream and 8 MiB on the
// connection before it credits them back (after writing them to Envoy), so a push of several MB
// is never held by a round trip; Envoy's requests get HTTP/2's defaults.
const (
	upStreamWindow   = 4 << 20
	upConnWindow     = 8 << 20
	downStreamWindow = 65535
	downConnWindow   = 65535
	ioBuffer         = 64 << 10
)

// serve accepts Envoy's connections until ctx ends and forwards each; it returns once every
// forwarding pair has ended.
func serve(ctx context.Context, ln net.Listener, up upstream) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() {
			if err := pair(ctx, c, up); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "floorfwd:", err)
			}
		})
	}
}

// pair forwards one Envoy connection over a TLS connection of its own to the control plane,
// stream ids unchanged, until either side ends.
func pair(ctx context.Context, down net.Conn, up upstream) error {
	defer down.Close()
	uc, err := (&tls.Dialer{Config: up.tls}).DialContext(ctx, "tcp", up.addr)
	if err != nil {
		return fmt.Errorf("dial control plane: %w", err)
	}
	defer uc.Close()
	stop := context.AfterFunc(ctx, func() { down.Close(); uc.Close() })
	defer stop()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(down, preface); err != nil || string(preface) != http2.ClientPreface {
		return fmt.Errorf("Envoy's connection preface: %q, %v", preface, err)
	}
	d := newHop(down, downStreamWindow, downConnWindow)
	u := newHop(uc, upStreamWindow, upConnWindow)
	if _, err := u.bw.WriteString(http2.ClientPreface); err != nil {
		return err
	}
	if err := u.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: upStreamWindow}); err != nil {
		return err
	}
	if err := u.fr.WriteWindowUpdate(0, upConnWindow-65535); err != nil {
		return err
	}
	if err := u.bw.Flush(); err != nil {
		return err
	}
	if err := d.fr.WriteSettings(); err != nil {
		return err
	}
	if err := d.bw.Flush(); err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- relay(d, u, up.extra) }()
	go func() { errc <- relay(u, d, nil) }()
	err = <-errc
	d.close()
	u.close()
	<-errc
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// hop is one side of a pair: its connection, the windows for sending to it, and what has been
// received from it but not yet credited back.
type hop struct {
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	fr   *http2.Framer // reads by the relay reading this hop; writes under wmu

	wmu sync.Mutex // guards bw and the framer's writing side

	mu       sync.Mutex // guards the sending windows and closed
	cond     *sync.Cond // signalled when a window grows or the hop closes
	connWin  int64
	initWin  int64
	win      map[uint32]int64
	maxFrame int
	closed   bool

	// Credit owed to the peer; only the relay reading this hop touches these.
	recvStream, recvConn int64
	owedConn             int64
	owed                 map[uint32]int64

	dec *hpack.Decoder // request header blocks read from this hop (Envoy's side)
	enc *hpack.Encoder // header blocks written to this hop (the control plane's side)
	hb  bytes.Buffer   // enc's output
}

func newHop(c net.Conn, recvStream, recvConn int64) *hop {
	h := &hop{conn: c, br: bufio.NewReaderSize(c, ioBuffer), bw: bufio.NewWriterSize(c, ioBuffer),
		connWin: 65535, initWin: 65535, win: map[uint32]int64{}, maxFrame: 16384,
		recvStream: recvStream, recvConn: recvConn, owed: map[uint32]int64{}}
	h.fr = http2.NewFramer(h.bw, h.br)
	h.cond = sync.NewCond(&h.mu)
	h.dec = hpack.NewDecoder(4096, nil)
	h.enc = hpack.NewEncoder(&h.hb)
	return h
}

func (h *hop) close() {
	h.conn.Close()
	h.mu.Lock()
	h.closed = true
	h.cond.Broadcast()
	h.mu.Unlock()
}

// relay reads src's frames and carries them to dst until src fails or says goodbye. extra,
// when not nil, marks src as Envoy's side: its header blocks are re-encoded with extra added.
func relay(src, dst *hop, extra metaFlag) error {
	for {
		f, err := src.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			if err := dst.sendData(f.StreamID, f.Data(), f.StreamEnded()); err != nil {
				return err
			}
			if err := src.credit(f.StreamID, int64(f.Length), f.StreamEnded()); err != nil {
				return err
			}
		case *http2.HeadersFrame:
			block, err := src.headerBlock(f)
			if err != nil {
				return err
			}
			if extra != nil {
				if block, err = reencode(src.dec, dst, block, extra); err != nil {
					return err
				}
			}
			if err := dst.writeHeaders(f.StreamID, block, f.StreamEnded()); err != nil {
				return err
			}
		case *http2.RSTStreamFrame:
			dst.forget(f.StreamID)
			if err := dst.locked(func() error { return dst.fr.WriteRSTStream(f.StreamID, f.ErrCode) }); err != nil {
				return err
			}
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			src.apply(f)
			if err := src.locked(src.fr.WriteSettingsAck); err != nil {
				return err
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := src.locked(func() error { return src.fr.WritePing(true, f.Data) }); err != nil {
					return err
				}
			}
		case *http2.WindowUpdateFrame:
			src.grow(f.StreamID, int64(f.Increment))
		case *http2.GoAwayFrame:
			return io.EOF
		}
		if src.br.Buffered() == 0 { // about to block on src: send what waits
			if err := dst.flush(); err != nil {
				return err
			}
			if err := src.flush(); err != nil {
				return err
			}
		}
	}
}

// headerBlock returns the whole header block of f, reading its CONTINUATION frames.
func (h *hop) headerBlock(f *http2.HeadersFrame) ([]byte, error) {
	if f.HeadersEnded() {
		return f.HeaderBlockFragment(), nil
	}
	block := bytes.Clone(f.HeaderBlockFragment())
	for {
		nf, err := h.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		c, ok := nf.(*http2.ContinuationFrame)
		if !ok || c.StreamID != f.StreamID {
			return nil, errors.New("header block interrupted")
		}
		block = append(block, c.HeaderBlockFragment()...)
		if c.HeadersEnded() {
			return block, nil
		}
	}
}

// reencode decodes Envoy's header block and encodes it for the control plane with extra added.
func reencode(dec *hpack.Decoder, dst *hop, block []byte, extra metaFlag) ([]byte, error) {
	fields, err := dec.DecodeFull(block)
	if err != nil {
		return nil, err
	}
	dst.wmu.Lock()
	defer dst.wmu.Unlock()
	dst.hb.Reset()
	for _, hf := range fields {
		if err := dst.enc.WriteField(hf); err != nil {
			return nil, err
		}
	}
	for _, kv := range extra {
		if err := dst.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]}); err != nil {
			return nil, err
		}
	}
	return bytes.Clone(dst.hb.Bytes()), nil
}

func (h *hop) writeHeaders(sid uint32, block []byte, end bool) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	max := h.maxFrameSize()
	first := true
	for first || len(block) > 0 {
		n := min(len(block), max)
		var err error
		if first {
			err = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: block[:n],
				EndStream: end, EndHeaders: n == len(block)})
		} else {
			err = h.fr.WriteContinuation(sid, n == len(block), block[:n])
		}
		if err != nil {
			return err
		}
		block, first = block[n:], false
	}
	if end {
		h.forget(sid)
	}
	return nil
}

// sendData writes data on stream sid in frames the peer's windows and frame size allow,
// waiting (after flushing what is buffered) while a window is closed.
func (h *hop) sendData(sid uint32, data []byte, end bool) error {
	for first := true; first || len(data) > 0; first = false {
		n := 0
		if len(data) > 0 {
			var err error
			if n, err = h.reserve(sid, len(data)); err != nil {
				return err
			}
		}
		last := n == len(data)
		h.wmu.Lock()
		err := h.fr.WriteData(sid, end && last, data[:n])
		h.wmu.Unlock()
		if err != nil {
			return err
		}
		data = data[n:]
	}
	if end {
		h.forget(sid)
	}
	return nil
}

// reserve takes up to want bytes of both windows for stream sid, waiting for them to open.
func (h *hop) reserve(sid uint32, want int) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		if h.closed {
			return 0, net.ErrClosed
		}
		w, ok := h.win[sid]
		if !ok {
			w = h.initWin
			h.win[sid] = w
		}
		if n := min(int64(want), h.connWin, w, int64(h.maxFrame)); n > 0 {
			h.connWin -= n
			h.win[sid] = w - n
			return int(n), nil
		}
		h.mu.Unlock()
		err := h.flush()
		h.mu.Lock()
		if err != nil {
			return 0, err
		}
		if h.closed || (h.connWin > 0 && h.win[sid] > 0) {
			continue
		}
		h.cond.Wait()
	}
}

func (h *hop) maxFrameSize() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxFrame
}

func (h *hop) forget(sid uint32) {
	h.mu.Lock()
	delete(h.win, sid)
	h.mu.Unlock()
}

// grow adds a WINDOW_UPDATE's increment.
func (h *hop) grow(sid uint32, inc int64) {
	h.mu.Lock()
	if sid == 0 {
		h.connWin += inc
	} else if w, ok := h.win[sid]; ok {
		h.win[sid] = w + inc
	} else {
		h.win[sid] = h.initWin + inc
	}
	h.cond.Broadcast()
	h.mu.Unlock()
}

// apply takes the peer's SETTINGS that bear on sending to it.
func (h *hop) apply(f *http2.SettingsFrame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingInitialWindowSize:
			d := int64(s.Val) - h.initWin
			for id := range h.win {
				h.win[id] += d
			}
			h.initWin = int64(s.Val)
		case http2.SettingMaxFrameSize:
			h.maxFrame = int(s.Val)
		}
		return nil
	})
	h.cond.Broadcast()
}

// credit counts n bytes received from the peer on stream sid as forwarded and sends
// WINDOW_UPDATEs once half a window is owed.
func (h *hop) credit(sid uint32, n int64, ended bool) error {
	h.owedConn += n
	var conn, strm int64
	if h.owedConn >= h.recvConn/2 {
		conn, h.owedConn = h.owedConn, 0
	}
	if ended {
		delete(h.owed, sid)
	} else {
		h.owed[sid] += n
		if h.owed[sid] >= h.recvStream/2 {
			strm, h.owed[sid] = h.owed[sid], 0
		}
	}
	if conn == 0 && strm == 0 {
		return nil
	}
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if conn > 0 {
		if err := h.fr.WriteWindowUpdate(0, uint32(conn)); err != nil {
			return err
		}
	}
	if strm > 0 {
		return h.fr.WriteWindowUpdate(sid, uint32(strm))
	}
	return nil
}

func (h *hop) locked(write func() error) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	return write()
}

func (h *hop) flush() error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if h.bw.Buffered() == 0 {
		return nil
	}
	return h.bw.Flush()
}
