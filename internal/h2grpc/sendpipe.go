package h2grpc

import (
	"context"
	"io"
	"sync"
)

// sendPipe is a ClientStream's request body: net/http's transport Reads it on its own
// goroutine and frames what it gets as DATA. SendMsg hands over a message's pieces (prefix and
// the caller's buffers) and waits until Read has copied every byte into the transport's frame
// buffer, so a message is copied once and the caller's buffers are free again when SendMsg
// returns. Unlike io.Pipe, one Read takes bytes across pieces, so the 5-byte prefix does not
// become a DATA frame of its own.
type sendPipe struct {
	// ctx is the stream's: once the response has arrived, net/http's transport watches the
	// request's context only after the body is done, so Read watches it to end the stream.
	ctx    context.Context
	give   chan [][]byte // SendMsg -> Read, unbuffered
	taken  chan struct{} // Read -> SendMsg: the message given is fully copied; buffered 1
	eof    chan struct{} // closed by closeSend
	closed chan struct{} // closed by Close (the transport is done with the body)

	eofOnce, closeOnce sync.Once

	mu       sync.Mutex // guards cur and isClosed: Close must not return while Read copies
	cur      [][]byte   // pieces of the message being read; nil between messages
	isClosed bool
}

var _ io.ReadCloser = (*sendPipe)(nil)

func newSendPipe(ctx context.Context) *sendPipe {
	return &sendPipe{
		ctx:    ctx,
		give:   make(chan [][]byte),
		taken:  make(chan struct{}, 1),
		eof:    make(chan struct{}),
		closed: make(chan struct{}),
	}
}

// send hands pieces to the transport and returns once they are copied; false when the body
// was closed first (the stream is over), in which case the pieces are no longer referenced.
func (p *sendPipe) send(pieces [][]byte) bool {
	select {
	case p.give <- pieces:
	case <-p.closed:
		return false
	}
	select {
	case <-p.taken:
		return true
	case <-p.closed:
		return false
	}
}

// closeSend makes Read return io.EOF after the current message: the transport then ends the
// request with END_STREAM.
func (p *sendPipe) closeSend() { p.eofOnce.Do(func() { close(p.eof) }) }

// Read copies as much of the pending message as fits into b.
func (p *sendPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	if p.isClosed {
		p.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	if p.cur == nil {
		p.mu.Unlock()
		var pieces [][]byte
		select {
		case pieces = <-p.give:
		case <-p.eof:
			return 0, io.EOF
		case <-p.closed:
			return 0, io.ErrClosedPipe
		case <-p.ctx.Done():
			return 0, p.ctx.Err()
		}
		p.mu.Lock()
		if p.isClosed {
			p.mu.Unlock()
			return 0, io.ErrClosedPipe
		}
		p.cur = pieces
	}
	n := 0
	for n < len(b) && len(p.cur) > 0 {
		c := copy(b[n:], p.cur[0])
		n += c
		if c == len(p.cur[0]) {
			p.cur = p.cur[1:]
		} else {
			p.cur[0] = p.cur[0][c:]
		}
	}
	if len(p.cur) == 0 {
		p.cur = nil
		p.taken <- struct{}{}
	}
	p.mu.Unlock()
	return n, nil
}

// Close is called by the transport when it is done with the body (stream ended or aborted).
func (p *sendPipe) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.isClosed = true
		p.cur = nil
		p.mu.Unlock()
		close(p.closed)
	})
	return nil
}
