package h2grpc

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readLoop is the connection's one reader: it reads every frame, delivers DATA into the
// streams' buffers (the core's readData) and answers what the protocol asks (SETTINGS ACK, PING ACK). A protocol
// error of the server closes the connection with GOAWAY; a stream error resets that stream.
func (cc *clientConn) readLoop() {
	defer cc.wg.Done()
	var err error
	for first := true; ; first = false {
		var f http2.Frame
		f, err = cc.readFrame(first, cc)
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				cc.streamError(se.StreamID, se.Code, status.Errorf(codes.Internal, "h2grpc: bad frame from the server: %v", err))
				continue
			}
			break
		}
		if f == nil {
			continue
		}
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
		return cc.onSettings(f, cc)
	case *http2.WindowUpdateFrame: // read by readWindowUpdate
	case *http2.PingFrame:
		cc.onPing(f)
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

// errDataBeforeHeaders is the cause of the stream error for DATA before the response headers.
var errDataBeforeHeaders = errors.New("DATA before the response headers")

// dataReceiver is the stream a DATA frame is for (connSide): none for a stream we have reset
// or finished, whose frames the server may have sent before it learnt (dropped), and a
// connection error for a stream never opened.
func (cc *clientConn) dataReceiver(fh http2.FrameHeader, _ int) (receiver, error) {
	s := cc.stream(fh.StreamID)
	if s == nil {
		if cc.idle(fh.StreamID) {
			return nil, connProtocolError{http2.ErrCodeProtocol, "DATA on an idle stream"}
		}
		return nil, nil
	}
	s.in.mu.Lock()
	got := s.gotHeaders
	s.in.mu.Unlock()
	if !got {
		return nil, http2.StreamError{StreamID: fh.StreamID, Code: http2.ErrCodeProtocol, Cause: errDataBeforeHeaders}
	}
	return s, nil
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
	s.in.mu.Lock()
	got := s.gotHeaders
	s.in.mu.Unlock()
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
		s.in.mu.Lock()
		s.gotHeaders, s.httpStatus, s.header = true, code, h
		s.in.cond.Broadcast()
		s.in.mu.Unlock()
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

// shiftSendWindowsLocked, sendWindowLocked and settingLocked are the client's connSide.
func (cc *clientConn) shiftSendWindowsLocked(delta int64) (over uint32) {
	for _, s := range cc.streams {
		if shiftWindowLocked(&s.sendWin, delta) {
			over = s.id
		}
	}
	return over
}

func (cc *clientConn) sendWindowLocked(id uint32) (*int64, error) {
	if s := cc.streams[id]; s != nil {
		return &s.sendWin, nil
	}
	if id%2 == 0 || id >= cc.nextID {
		return nil, connProtocolError{http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"}
	}
	return nil, nil
}

func (cc *clientConn) settingLocked(st http2.Setting) {
	if st.ID == http2.SettingMaxConcurrentStreams {
		cc.maxStreams = st.Val
		cc.cond.Broadcast()
	}
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
