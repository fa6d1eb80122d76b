package h2grpc

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// recvChunk is the largest pooled buffer a request message is read into; bigger messages
// take several (grpc-go's default pool keeps buffers up to 1 MiB).
const recvChunk = 1 << 20

// flushErrorer is what net/http's HTTP/2 response writer offers to push buffered bytes out.
type flushErrorer interface{ FlushError() error }

// ServerStream is one stream served by a Handler. One goroutine may receive (RecvMsg) while
// another sends (SendMsg, BeginMsg, Write); both end before the Handler returns.
type ServerStream struct {
	// immutable after newServerStream
	ctx      context.Context
	w        http.ResponseWriter
	flusher  flushErrorer
	body     io.Reader
	encoding string // the request's grpc-encoding
	max      int

	// receive side: owned by the receiving goroutine
	rhdr    [prefixLen]byte
	recvErr error

	// send side: owned by the sending goroutine
	whdr        [prefixLen]byte
	sentHeaders bool
	inMsg       bool
	msgLeft     int // bytes of the begun message still to Write
	sendErr     error
}

func newServerStream(ctx context.Context, w http.ResponseWriter, r *http.Request, max int) *ServerStream {
	f, _ := w.(flushErrorer) // net/http's HTTP/2 writer always has it
	return &ServerStream{ctx: ctx, w: w, flusher: f, body: r.Body, encoding: r.Header.Get("Grpc-Encoding"), max: max}
}

// Context ends when the client goes away, the stream's grpc-timeout passes, or Stop.
func (s *ServerStream) Context() context.Context { return s.ctx }

// RecvMsg reads one whole request message into buffers of mem.DefaultBufferPool; the caller
// owns them (Free). io.EOF when the client half-closed. A malformed message (truncated, over
// MaxRecvMsgBytes, compressed) is a status error the handler should return: it then goes to
// the client as the stream's status.
func (s *ServerStream) RecvMsg() (mem.BufferSlice, error) {
	if s.recvErr != nil {
		return nil, s.recvErr
	}
	size, err := readPrefix(s.body, &s.rhdr, s.max)
	if err != nil {
		if err == io.EOF {
			s.recvErr = io.EOF
			return nil, err
		}
		if err == errCompressed && s.encoding != "" && s.encoding != "identity" {
			// grpc-go's server for an encoding it has no decompressor for.
			err = status.Errorf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", s.encoding)
		}
		return nil, s.failRecv(err)
	}
	pool := mem.DefaultBufferPool()
	var out mem.BufferSlice
	for got := 0; got < size; {
		n := min(size-got, recvChunk)
		bp := pool.Get(n)
		m, err := io.ReadFull(s.body, *bp)
		if err != nil {
			pool.Put(bp)
			out.Free()
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, s.failRecv(errTruncated(got+m, size))
			}
			return nil, s.failRecv(err)
		}
		out = append(out, mem.NewBuffer(bp, pool))
		got += n
	}
	return out, nil
}

func (s *ServerStream) failRecv(err error) error {
	if _, ok := status.FromError(err); !ok {
		err = s.streamError(err)
	}
	s.recvErr = err
	return err
}

// streamError turns an I/O error of the stream into a status: its context's end when it has
// ended (the client went away, Stop), else Unavailable.
func (s *ServerStream) streamError(err error) error {
	if s.ctx.Err() != nil {
		return status.FromContextError(s.ctx.Err()).Err()
	}
	return status.Errorf(codes.Unavailable, "h2grpc: stream: %v", err)
}

// SendMsg sends one whole message and returns only once net/http's HTTP/2 server has written
// it to the connection: a handler's write waits for its DATA frames to be written
// (writeDataFromHandler), which waits for the client's flow-control window; the connection
// is a writeBehindConn, which takes at most 64 KiB more than the socket has (as the kernel's
// socket buffer does). data is neither kept nor freed.
func (s *ServerStream) SendMsg(data mem.BufferSlice) error {
	if s.inMsg {
		return status.Error(codes.Internal, "h2grpc: SendMsg inside a message begun with BeginMsg")
	}
	n := data.Len()
	if err := s.writePrefix(n); err != nil {
		return err
	}
	for _, b := range data {
		if err := s.write(b.ReadOnlyData()); err != nil {
			return err
		}
	}
	return s.flush()
}

// BeginMsg starts a message of size bytes whose body follows in pieces (Write). Its prefix
// goes out with the first piece.
func (s *ServerStream) BeginMsg(size int) error {
	if s.inMsg {
		return status.Errorf(codes.Internal, "h2grpc: BeginMsg with %d bytes of the last message not written", s.msgLeft)
	}
	if err := s.writePrefix(size); err != nil {
		return err
	}
	if size == 0 {
		return s.flush()
	}
	s.inMsg, s.msgLeft = true, size
	return nil
}

// Write sends the next piece of the begun message and returns once it is written to the
// connection, as SendMsg. More bytes than the message has left is an error (nothing sent).
func (s *ServerStream) Write(p []byte) error {
	if !s.inMsg {
		return status.Error(codes.Internal, "h2grpc: Write without BeginMsg")
	}
	if len(p) > s.msgLeft {
		return status.Errorf(codes.Internal, "h2grpc: Write of %d bytes with %d left in the message", len(p), s.msgLeft)
	}
	if err := s.write(p); err != nil {
		return err
	}
	s.msgLeft -= len(p)
	if s.msgLeft == 0 {
		s.inMsg = false
	}
	return s.flush()
}

// writePrefix writes the response headers' fields (they go out with the first bytes) and the
// message prefix. The prefix stays in net/http's 4 KiB write buffer and leaves with the first
// bytes of the body: a small message is one DATA frame; a large one fills that buffer once and
// the rest goes from the caller's buffer straight to the framer (bufio.Writer skips its
// buffer for a write larger than it when it is empty).
func (s *ServerStream) writePrefix(size int) error {
	if s.sendErr != nil {
		return s.sendErr
	}
	if size < 0 || uint64(size) > math.MaxUint32 {
		return status.Errorf(codes.ResourceExhausted, "h2grpc: message of %d bytes is over the gRPC limit", size)
	}
	if !s.sentHeaders {
		s.sentHeaders = true
		h := s.w.Header()
		h["Content-Type"] = []string{"application/grpc"}
		h["Date"] = nil
		h["Content-Length"] = nil
	}
	putPrefix(&s.whdr, size)
	return s.write(s.whdr[:])
}

func (s *ServerStream) write(p []byte) error {
	if s.sendErr != nil {
		return s.sendErr
	}
	if len(p) == 0 {
		return nil
	}
	if _, err := s.w.Write(p); err != nil {
		s.sendErr = s.streamError(err)
		return s.sendErr
	}
	return nil
}

func (s *ServerStream) flush() error {
	if s.sendErr != nil {
		return s.sendErr
	}
	if err := s.flusher.FlushError(); err != nil {
		s.sendErr = s.streamError(err)
		return s.sendErr
	}
	return nil
}

// finish sets the stream's status from the handler's error: in trailers after a response
// body, or as a trailers-only response when nothing was sent. net/http writes them when the
// handler returns.
func (s *ServerStream) finish(err error) {
	// grpc-go (server.go processStreamingRPC): a status error keeps its status, a context
	// error becomes Canceled/DeadlineExceeded, anything else Unknown with its text.
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	if st.Code() == codes.OK && s.inMsg {
		st = status.Newf(codes.Internal, "h2grpc: handler returned with %d bytes of a message not written", s.msgLeft)
	}
	h := s.w.Header()
	if !s.sentHeaders {
		h["Content-Type"] = []string{"application/grpc"}
		setStatusHeaders(h, "", st)
		return
	}
	setStatusHeaders(h, http.TrailerPrefix, st)
}
