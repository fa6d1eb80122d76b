package h2grpc

import (
	"context"
	"errors"
	"io"
	"math"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// recvChunk is the largest pooled buffer a request message is read into; bigger messages
// take several (grpc-go's default pool keeps buffers up to 1 MiB).
const recvChunk = 1 << 20

// ServerStream is one stream served by a Handler. One goroutine may receive (RecvMsg) while
// another sends (SendMsg, BeginMsg, Write); both end before the Handler returns.
type ServerStream struct {
	// immutable after newServerStream
	sc       *serverConn
	id       uint32
	ctx      context.Context
	cancel   context.CancelFunc // ends ctx: the stream is reset or over
	stopWake func() bool        // unregisters the wake-up of senders at ctx's end
	encoding string             // the request's grpc-encoding
	max      int

	in recvStream // request data, filled by the connection's reader (core_recvstream.go)

	// guarded by sc.mu
	sendWin int64 // bytes the stream may still send
	reset   bool  // reset by either side: nothing more is written
	ended   bool  // no longer counted in sc.running (the handler has ended the stream)

	// receive side: owned by the receiving goroutine
	rhdr    [prefixLen]byte
	recvErr error

	// send side: owned by the sending goroutine
	whdr        [prefixLen]byte
	pieces      [][]byte // scratch: the pieces of what is being sent
	prefixDue   bool     // whdr is still to go out, before the next Write's bytes
	sentHeaders bool
	inMsg       bool
	msgLeft     int // bytes of the begun message still to Write
	sendErr     error
}

func newServerStream(sc *serverConn, id uint32, encoding string, hasTimeout bool, timeout time.Duration) *ServerStream {
	s := &ServerStream{sc: sc, id: id, encoding: encoding, max: sc.s.cfg.MaxRecvMsgBytes}
	s.in.init(&sc.conn, id, sc.s.cfg.StreamWindow)
	ctx, cancel := context.WithCancel(sc.ctx)
	if hasTimeout {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, timeout)
		base := cancel
		cancel = func() { cancelTimeout(); base() }
	}
	s.ctx, s.cancel = ctx, cancel
	// A sender waiting for flow control, or a receiver waiting for data, learns of the end of
	// the stream's context (client gone, grpc-timeout, Stop).
	s.stopWake = context.AfterFunc(ctx, func() {
		s.in.abort(ctx.Err())
		sc.wake()
	})
	return s
}

// release ends the stream's context and returns its buffers.
func (s *ServerStream) release() {
	s.stopWake()
	s.cancel()
	s.in.abort(io.ErrClosedPipe) // a receiver may outlive the handler (the proxy's receive loop does)
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
	size, err := readPrefix(&s.in, &s.rhdr, s.max)
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
		m, err := io.ReadFull(&s.in, *bp)
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

// SendMsg sends one whole message and returns only once it is written to the connection: it
// waits for the client's flow-control windows as its DATA frames go. data is neither kept nor
// freed.
func (s *ServerStream) SendMsg(data mem.BufferSlice) error {
	if s.inMsg {
		return status.Error(codes.Internal, "h2grpc: SendMsg inside a message begun with BeginMsg")
	}
	n := data.Len()
	if err := s.checkSize(n); err != nil {
		return err
	}
	putPrefix(&s.whdr, n)
	s.pieces = append(s.pieces[:0], s.whdr[:])
	for _, b := range data {
		s.pieces = append(s.pieces, b.ReadOnlyData())
	}
	err := s.send(s.pieces, prefixLen+n)
	clear(s.pieces)
	return err
}

// BeginMsg starts a message of size bytes whose body follows in pieces (Write). Its prefix
// goes out with the first piece.
func (s *ServerStream) BeginMsg(size int) error {
	if s.inMsg {
		return status.Errorf(codes.Internal, "h2grpc: BeginMsg with %d bytes of the last message not written", s.msgLeft)
	}
	if err := s.checkSize(size); err != nil {
		return err
	}
	putPrefix(&s.whdr, size)
	if size == 0 {
		s.pieces = append(s.pieces[:0], s.whdr[:])
		err := s.send(s.pieces, prefixLen)
		clear(s.pieces)
		return err
	}
	s.inMsg, s.msgLeft, s.prefixDue = true, size, true
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
	s.pieces = s.pieces[:0]
	total := len(p)
	if s.prefixDue {
		s.pieces = append(s.pieces, s.whdr[:])
		total += prefixLen
	}
	s.pieces = append(s.pieces, p)
	err := s.send(s.pieces, total)
	clear(s.pieces)
	if err != nil {
		return err
	}
	s.prefixDue = false
	s.msgLeft -= len(p)
	if s.msgLeft == 0 {
		s.inMsg = false
	}
	return nil
}

// WriteBuffers sends the next pieces of the begun message, in order, as Write would send each,
// but as one batch: the connection's writer takes as much of them as the send windows allow (at
// most maxSendBatch) per hold and reaches the socket once per hold, not once per piece (a
// forwarder that fell a few frames behind catches up with one write). More bytes than the message
// has left is an error (nothing sent). ps itself is not kept.
func (s *ServerStream) WriteBuffers(ps [][]byte) error {
	if !s.inMsg {
		return status.Error(codes.Internal, "h2grpc: Write without BeginMsg")
	}
	n := 0
	for _, p := range ps {
		n += len(p)
	}
	if n > s.msgLeft {
		return status.Errorf(codes.Internal, "h2grpc: Write of %d bytes with %d left in the message", n, s.msgLeft)
	}
	s.pieces = s.pieces[:0]
	total := n
	if s.prefixDue {
		s.pieces = append(s.pieces, s.whdr[:])
		total += prefixLen
	}
	s.pieces = append(s.pieces, ps...)
	err := s.send(s.pieces, total)
	clear(s.pieces)
	if err != nil {
		return err
	}
	s.prefixDue = false
	s.msgLeft -= n
	if s.msgLeft == 0 {
		s.inMsg = false
	}
	return nil
}

func (s *ServerStream) checkSize(size int) error {
	if s.sendErr != nil {
		return s.sendErr
	}
	if size < 0 || uint64(size) > math.MaxUint32 {
		return status.Errorf(codes.ResourceExhausted, "h2grpc: message of %d bytes is over the gRPC limit", size)
	}
	return nil
}

// send writes total bytes of pieces as DATA frames (after the response headers, the first
// time), each batch as soon as both send windows allow, and returns once all are written.
func (s *ServerStream) send(pieces [][]byte, total int) error {
	if s.sendErr != nil {
		return s.sendErr
	}
	sc := s.sc
	for total > 0 {
		n, err := sc.reserve(s, total)
		if err != nil {
			s.sendErr = s.streamError(err)
			return s.sendErr
		}
		sc.lockWrite()
		if !s.sentHeaders {
			s.sentHeaders = true
			sc.writeResponseHeaders(s.id)
		}
		pieces = sc.writeDataLocked(s.id, pieces, n, false)
		if err := sc.unlockWrite(); err != nil {
			s.sendErr = s.streamError(err)
			return s.sendErr
		}
		total -= n
	}
	return nil
}

// finish sends the stream's status from the handler's error: in trailers after a response
// body, or as a trailers-only response when nothing was sent; then, when the client has not
// ended its request, RST_STREAM NO_ERROR (RFC 9113 section 8.1, as grpc-go). A stream reset
// gets nothing more.
func (s *ServerStream) finish(err error) {
	defer s.sc.removeStream(s)
	// grpc-go (server.go processStreamingRPC): a status error keeps its status, a context
	// error becomes Canceled/DeadlineExceeded, anything else Unknown with its text.
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	if st.Code() == codes.OK && s.inMsg {
		st = status.Newf(codes.Internal, "h2grpc: handler returned with %d bytes of a message not written", s.msgLeft)
	}
	sc := s.sc
	sc.mu.Lock()
	reset := s.reset || sc.closed
	sc.endRunningLocked(s)
	sc.mu.Unlock()
	if reset {
		return
	}
	requestEnded := s.in.ended()
	sc.lockWrite()
	sc.hbuf.Reset()
	if !s.sentHeaders {
		sc.encodeField(":status", "200")
		sc.encodeField("content-type", "application/grpc")
	}
	sc.encodeStatus(st)
	sc.writeHeaderBlockLocked(s.id, true)
	if !requestEnded {
		sc.note(sc.fr.WriteRSTStream(s.id, http2.ErrCodeNo))
	}
	sc.unlockWrite()
}
