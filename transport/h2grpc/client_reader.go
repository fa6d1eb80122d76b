package h2grpc

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// readLoop is the connection's one reader: it reads every frame, delivers DATA into the
// streams' buffers and answers what the protocol asks (SETTINGS ACK, PING ACK). A protocol
// error of the server closes the connection with GOAWAY; a stream error resets that stream.
func (cc *clientConn) readLoop() {
	defer cc.wg.Done()
	var err error
	for first := true; ; first = false {
		var f http2.Frame
		var fh http2.FrameHeader
		cc.flushUnflushed()
		fh, err = cc.fr.ReadFrameHeader()
		if err == nil && first && (fh.Type != http2.FrameSettings || fh.Flags.Has(http2.FlagSettingsAck)) {
			// RFC 9113 section 3.4: the server's preface is a SETTINGS frame (not an ACK).
			err = connProtocolError{http2.ErrCodeProtocol, fmt.Sprintf("first frame from the server is %v, not SETTINGS", fh.Type)}
			break
		}
		if err == nil && fh.Type == http2.FrameData {
			// DATA is read here, its payload straight into a pooled buffer.
			cc.lastRead.Store(time.Now().UnixNano())
			if err = cc.readData(fh); err != nil {
				break
			}
			continue
		}
		if err == nil {
			f, err = cc.fr.ReadFrameForHeader(fh)
		}
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				cc.streamError(se.StreamID, se.Code, status.Errorf(codes.Internal, "h2grpc: malformed frame from the server: %v", err))
				continue
			}
			var ce http2.ConnectionError
			switch {
			case errors.As(err, &ce):
				err = connProtocolError{http2.ErrCode(ce), fmt.Sprintf("malformed frame: %v", cc.fr.ErrorDetail())}
			case errors.Is(err, http2.ErrFrameTooLarge):
				err = connProtocolError{http2.ErrCodeFrameSize, "frame larger than 16384 bytes"}
			}
			break
		}
		cc.lastRead.Store(time.Now().UnixNano())
		if err = cc.handle(f); err != nil {
			break
		}
	}
	var pe connProtocolError
	if errors.As(err, &pe) {
		cc.goAway(pe)
		err = status.Errorf(codes.Internal, "h2grpc: protocol error of %s: %v", cc.cfg.Address, pe)
	}
	cc.close(nil)
	cc.fail(errConnLost(cc.cfg.Address, err))
	close(cc.done)
}

func (cc *clientConn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return cc.onHeaders(f)
	case *http2.SettingsFrame:
		return cc.onSettings(f)
	case *http2.WindowUpdateFrame:
		return cc.onWindowUpdate(f)
	case *http2.PingFrame:
		if f.IsAck() {
			select {
			case cc.pingAck <- struct{}{}:
			default:
			}
			return nil
		}
		cc.lockWrite()
		var err error
		if cc.werr == nil {
			err = cc.fr.WritePing(true, f.Data)
		}
		cc.unlockWriteReader(err)
	case *http2.RSTStreamFrame:
		if s := cc.stream(f.StreamID); s != nil {
			code := rstCode(uint32(f.ErrCode))
			if code == codes.Canceled && !s.deadline.IsZero() && !s.deadline.After(time.Now()) {
				// The server cancels a call whose deadline (our grpc-timeout) passed, often just
				// before our own timer fires: the cause is the deadline, as grpc-go reports it.
				code = codes.DeadlineExceeded
			}
			cc.remoteReset(s, status.Errorf(code, "h2grpc: stream reset by the server (HTTP/2 %v)", f.ErrCode))
		} else if cc.idle(f.StreamID) {
			return connProtocolError{http2.ErrCodeProtocol, "RST_STREAM on an idle stream"}
		}
	case *http2.GoAwayFrame:
		cc.onGoAway(f)
	case *http2.PushPromiseFrame:
		return connProtocolError{http2.ErrCodeProtocol, "PUSH_PROMISE with push disabled"}
	}
	// PRIORITY and unknown frame types are ignored (RFC 9113 sections 5.3.2 and 5.5).
	return nil
}

// stream returns the open stream of an ID, nil when there is none.
func (cc *clientConn) stream(id uint32) *h2stream {
	cc.mu.Lock()
	s := cc.streams[id]
	cc.mu.Unlock()
	return s
}

// idle reports whether a stream ID was never opened by us (a server may not name it).
func (cc *clientConn) idle(id uint32) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return id%2 == 0 || id >= cc.nextID
}

// readData reads a DATA frame's payload (RFC 9113 section 6.1) after its header: the data
// goes from the read buffer into a pooled buffer the stream's reader takes, the only copy.
func (cc *clientConn) readData(fh http2.FrameHeader) error {
	if fh.StreamID == 0 {
		return connProtocolError{http2.ErrCodeProtocol, "DATA on stream 0"}
	}
	size := int64(fh.Length)
	dataLen, pad := int(fh.Length), 0
	if fh.Flags.Has(http2.FlagDataPadded) {
		if fh.Length == 0 {
			return connProtocolError{http2.ErrCodeProtocol, "padded DATA without its pad length"}
		}
		p, err := cc.br.ReadByte()
		if err != nil {
			return err
		}
		pad = int(p)
		if pad > dataLen-1 {
			return connProtocolError{http2.ErrCodeProtocol, "DATA padding longer than the frame"}
		}
		dataLen -= 1 + pad
	}
	if cc.recvWin.Add(-size) < 0 {
		return connProtocolError{http2.ErrCodeFlowControl, "DATA beyond the connection window"}
	}
	s := cc.stream(fh.StreamID)
	if s == nil {
		if cc.idle(fh.StreamID) {
			return connProtocolError{http2.ErrCodeProtocol, "DATA on an idle stream"}
		}
		// A stream we have reset or finished: the bytes are the connection's to grant back.
		if _, err := cc.br.Discard(dataLen + pad); err != nil {
			return err
		}
		cc.consumed(size)
		return nil
	}
	var b *[]byte
	if dataLen > 0 {
		b = mem.DefaultBufferPool().Get(dataLen)
		if _, err := io.ReadFull(cc.br, *b); err != nil {
			mem.DefaultBufferPool().Put(b)
			return err
		}
	}
	if _, err := cc.br.Discard(pad); err != nil {
		return err
	}
	var code http2.ErrCode
	var why error
	s.mu.Lock()
	switch {
	case !s.gotHeaders:
		code, why = http2.ErrCodeProtocol, status.Error(codes.Internal, "h2grpc: DATA before the response headers")
	case s.recvEnd || s.err != nil:
		code, why = http2.ErrCodeStreamClosed, status.Error(codes.Internal, "h2grpc: DATA after the end of the stream")
	case size > s.recvWin:
		code, why = http2.ErrCodeFlowControl, status.Error(codes.Internal, "h2grpc: server sent beyond the stream window")
	default:
		s.recvWin -= size
		if b != nil {
			s.push(b)
			b = nil
		}
		s.wake()
	}
	s.mu.Unlock()
	if why != nil {
		if b != nil {
			mem.DefaultBufferPool().Put(b)
		}
		cc.consumed(size)
		cc.streamError(fh.StreamID, code, why)
		return nil
	}
	if padding := size - int64(dataLen); padding > 0 {
		cc.consumed(padding) // padding is consumed on arrival
		s.consumed(int(padding))
	}
	if fh.Flags.Has(http2.FlagDataEndStream) {
		cc.remoteEnd(s, 0, nil, nil)
	}
	return nil
}

func (cc *clientConn) onHeaders(f *http2.MetaHeadersFrame) error {
	s := cc.stream(f.StreamID)
	if s == nil {
		if cc.idle(f.StreamID) {
			return connProtocolError{http2.ErrCodeProtocol, "HEADERS on an idle stream"}
		}
		return nil
	}
	if f.Truncated {
		cc.streamError(f.StreamID, http2.ErrCodeProtocol, status.Error(codes.Internal, "h2grpc: response header list too large"))
		return nil
	}
	s.mu.Lock()
	got := s.gotHeaders
	s.mu.Unlock()
	if !got {
		st := f.PseudoValue("status")
		code, err := strconv.Atoi(st)
		if err != nil || len(st) != 3 {
			cc.streamError(f.StreamID, http2.ErrCodeProtocol, status.Errorf(codes.Internal, "h2grpc: malformed header: bad or missing :status %q", st))
			return nil
		}
		if code >= 100 && code < 200 && !f.StreamEnded() {
			return nil // informational: the response follows
		}
		h := headerOf(f)
		if f.StreamEnded() {
			// Trailers-only: the headers carry the status.
			cc.remoteEnd(s, code, h, nil)
			return nil
		}
		s.mu.Lock()
		s.gotHeaders, s.httpStatus, s.header = true, code, h
		s.wake()
		s.mu.Unlock()
		return nil
	}
	if !f.StreamEnded() {
		cc.streamError(f.StreamID, http2.ErrCodeProtocol, status.Error(codes.Internal, "h2grpc: trailers without END_STREAM"))
		return nil
	}
	cc.remoteEnd(s, 0, nil, headerOf(f))
	return nil
}

// headerOf copies a header block's regular fields (the Framer reuses them).
func headerOf(f *http2.MetaHeadersFrame) http.Header {
	fields := f.RegularFields()
	h := make(http.Header, len(fields))
	for _, hf := range fields {
		k := http.CanonicalHeaderKey(hf.Name)
		h[k] = append(h[k], hf.Value)
	}
	return h
}

func (cc *clientConn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	var tableSize uint32
	haveTable := false
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				return connProtocolError{http2.ErrCode(ce), fmt.Sprintf("bad setting %v", st)}
			}
			return connProtocolError{http2.ErrCodeProtocol, fmt.Sprintf("bad setting %v", st)}
		}
		cc.mu.Lock()
		defer cc.mu.Unlock()
		switch st.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(st.Val) - cc.peerWin
			cc.peerWin = int64(st.Val)
			for _, s := range cc.streams {
				s.sendWin += delta // may go negative (RFC 9113 section 6.9.2)
				if s.sendWin > maxWindow {
					// Section 6.9.2: a change that takes a window past 2^31-1.
					return connProtocolError{http2.ErrCodeFlowControl, fmt.Sprintf("INITIAL_WINDOW_SIZE %d takes stream %d's window over 2^31-1", st.Val, s.id)}
				}
			}
			cc.cond.Broadcast()
		case http2.SettingMaxFrameSize:
			cc.frameSize = int(st.Val)
		case http2.SettingMaxConcurrentStreams:
			cc.maxStreams = st.Val
			cc.cond.Broadcast()
		case http2.SettingHeaderTableSize:
			tableSize, haveTable = st.Val, true
		}
		return nil
	})
	if err != nil {
		return err
	}
	cc.lockWrite()
	if haveTable {
		cc.enc.SetMaxDynamicTableSizeLimit(tableSize)
	}
	if cc.werr == nil {
		err = cc.fr.WriteSettingsAck()
	}
	cc.unlockWriteReader(err)
	return nil
}

func (cc *clientConn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if cc.sendWin+inc > maxWindow {
			return connProtocolError{http2.ErrCodeFlowControl, "connection window over 2^31-1"}
		}
		cc.sendWin += inc
		cc.cond.Broadcast()
		return nil
	}
	s := cc.streams[f.StreamID]
	if s == nil {
		if f.StreamID%2 == 0 || f.StreamID >= cc.nextID {
			return connProtocolError{http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"}
		}
		return nil
	}
	if s.sendWin+inc > maxWindow {
		cc.mu.Unlock()
		cc.streamError(f.StreamID, http2.ErrCodeFlowControl, status.Error(codes.Internal, "h2grpc: server's stream window over 2^31-1"))
		cc.mu.Lock()
		return nil
	}
	s.sendWin += inc
	cc.cond.Broadcast()
	return nil
}

func (cc *clientConn) onGoAway(f *http2.GoAwayFrame) {
	err := status.Errorf(codes.Unavailable, "h2grpc: %s sent GOAWAY (%v) before the stream started", cc.cfg.Address, f.ErrCode)
	cc.mu.Lock()
	cc.goaway = true
	var refused []*h2stream
	for id, s := range cc.streams {
		if id > f.LastStreamID {
			refused = append(refused, s)
		}
	}
	left := len(cc.streams) - len(refused)
	cc.mu.Unlock()
	for _, s := range refused {
		cc.remoteReset(s, err)
	}
	if left == 0 {
		cc.close(nil)
	}
}

// streamError resets a stream for an error of the server on it.
func (cc *clientConn) streamError(id uint32, code http2.ErrCode, err error) {
	if s := cc.stream(id); s != nil {
		cc.reset(s, code, err)
		return
	}
	cc.writeRST(id, code)
}
