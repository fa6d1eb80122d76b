package h2grpc

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// ClientStream is one bidirectional gRPC stream of a Client. One goroutine may send
// (SendMsg, CloseSend) while another receives (RecvMsgHeader, Read); Close may be called from
// any goroutine, any number of times.
type ClientStream struct {
	// immutable after Open
	ctx       context.Context
	cancel    context.CancelFunc
	h         *h2stream
	max       int
	stopAfter func() bool   // stops the reset on ctx's end
	afterDone chan struct{} // closed once that reset has run

	// send side: owned by the sending goroutine
	shdr       [prefixLen]byte
	pieces     [][]byte
	sendClosed bool

	// receive side: owned by the receiving goroutine
	gotResp bool
	rhdr    [prefixLen]byte
	left    int   // bytes of the current message not read yet
	recvErr error // sticky once the stream has ended for the receiver

	closeOnce sync.Once
}

// SendMsg sends one message: the 5-byte prefix (uncompressed) and data. It returns once the
// transport has copied data (it may block on flow control) and never keeps or frees data.
// When the stream is already over it returns io.EOF, as grpc-go does: RecvMsgHeader tells why.
func (s *ClientStream) SendMsg(data mem.BufferSlice) error {
	if s.sendClosed {
		return status.Error(codes.Internal, "h2grpc: SendMsg after CloseSend")
	}
	n := data.Len()
	if uint64(n) > math.MaxUint32 {
		return status.Errorf(codes.ResourceExhausted, "h2grpc: message of %d bytes is over the gRPC limit", n)
	}
	putPrefix(&s.shdr, n)
	s.pieces = append(s.pieces[:0], s.shdr[:])
	for _, b := range data {
		if d := b.ReadOnlyData(); len(d) > 0 {
			s.pieces = append(s.pieces, d)
		}
	}
	ok := s.h.send(s.pieces, false)
	clear(s.pieces) // keep no reference to the caller's buffers
	if !ok {
		return io.EOF
	}
	return nil
}

// CloseSend half-closes the stream (END_STREAM after the last message sent).
func (s *ClientStream) CloseSend() error {
	if !s.sendClosed {
		s.sendClosed = true
		s.h.send(nil, true)
	}
	return nil
}

// body reads the response's DATA (the stream's byte stream of messages).
type streamBody ClientStream

func (b *streamBody) Read(p []byte) (int, error) { return b.h.in.Read(p) }

// RecvMsgHeader waits for the next message and returns its length; its body is then read with
// Read. What was left unread of the previous message is skipped. At the stream's end it returns
// io.EOF when grpc-status is 0, else the stream's status as an error; a transport failure is
// codes.Unavailable; a message over MaxRecvMsgBytes ResourceExhausted and a compressed one
// Internal (both cancel the stream).
func (s *ClientStream) RecvMsgHeader() (int, error) {
	if s.recvErr != nil {
		return 0, s.recvErr
	}
	if !s.gotResp {
		if err := s.awaitResponse(); err != nil {
			return 0, s.fail(err)
		}
	}
	for s.left > 0 {
		n, err := s.h.in.discard(s.left)
		s.left -= n
		if err != nil {
			return 0, s.fail(s.bodyError(err))
		}
	}
	body := (*streamBody)(s)
	n, err := readPrefix(body, &s.rhdr, s.max)
	switch {
	case err == nil:
		s.left = n
		return n, nil
	case err == io.EOF:
		return 0, s.fail(s.endStatus())
	default:
		return 0, s.fail(err)
	}
}

// Read reads the current message's body into p; it returns io.EOF exactly at the message's
// end (and 0, io.EOF before any RecvMsgHeader or after the last byte).
func (s *ClientStream) Read(p []byte) (int, error) {
	if s.recvErr != nil {
		return 0, s.recvErr
	}
	if s.left == 0 {
		return 0, io.EOF
	}
	if len(p) > s.left {
		p = p[:s.left]
	}
	n, err := s.h.in.Read(p)
	s.left -= n
	if err != nil && s.left > 0 {
		return n, s.fail(s.bodyError(err))
	}
	if s.left == 0 {
		return n, io.EOF
	}
	return n, nil
}

// bodyError says why the body ended inside a message.
func (s *ClientStream) bodyError(err error) error {
	if err == io.EOF {
		_, _, trailer := s.h.response()
		if st, ok := statusFromHeader(trailer); ok && st.Code() != codes.OK {
			return st.Err()
		}
		return status.Error(codes.Internal, "h2grpc: server ended the stream inside a message")
	}
	return err
}

// Close abandons the stream: it is reset unless already over. Idempotent.
func (s *ClientStream) Close() {
	s.closeOnce.Do(func() {
		if s.stopAfter() {
			s.h.cc.reset(s.h, http2.ErrCodeCancel, status.Error(codes.Canceled, "h2grpc: stream closed"))
		} else {
			<-s.afterDone
		}
		s.cancel()
	})
}

// fail records the stream's end for the receiver and resets the stream unless it is over.
func (s *ClientStream) fail(err error) error {
	s.recvErr = err
	s.left = 0
	s.h.cc.reset(s.h, http2.ErrCodeCancel, err)
	return err
}

// awaitResponse waits for the response headers and checks them the way grpc-go's client does
// (internal/transport/http2_client.go operateHeaders): a gRPC content-type makes the stream
// gRPC whatever the HTTP status; otherwise the HTTP status maps to a code and the message
// names the status and the content-type.
func (s *ClientStream) awaitResponse() error {
	if err := s.h.awaitHeaders(); err != nil {
		return err
	}
	s.gotResp = true
	code, header, _ := s.h.response()
	if ct := header.Get("Content-Type"); !isGRPCContentType(ct) {
		msg := fmt.Sprintf("unexpected HTTP status code received from server: %d (%s)", code, http.StatusText(code))
		if ct == "" {
			msg += "; malformed header: missing HTTP content-type"
		} else {
			msg += fmt.Sprintf("; transport: received unexpected content-type %q", ct)
		}
		return status.Error(httpStatusCode(code), msg)
	}
	return nil
}

// endStatus is the stream's status once the body ended cleanly between messages: from the
// trailers, or from the headers of a trailers-only response.
func (s *ClientStream) endStatus() error {
	_, header, trailer := s.h.response()
	st, ok := statusFromHeader(trailer)
	if !ok {
		st, ok = statusFromHeader(header)
	}
	if !ok {
		if len(trailer) == 0 {
			return status.Error(codes.Internal, "server closed the stream without sending trailers")
		}
		return status.Error(codes.Unknown, "h2grpc: trailers without grpc-status")
	}
	if st.Code() == codes.OK {
		return io.EOF
	}
	return st.Err()
}
