package h2grpc

import (
	"errors"
	"io"
	"runtime"
	"sync"
)

// A connection's read and write buffers are large only while data flows. Every connection the
// agent holds (to Istiod, from Envoy for xDS and for SDS) is idle nearly all the time, and a
// pair of 64 KiB bufio buffers per connection was the largest part of an idle agent's live heap
// (about 400 KiB of 1.9 MiB, three connections). connReader and connWriter borrow their large
// buffer from bigBufs while bytes stream through and give it back when a burst is over, so an
// idle connection holds smallBufSize for reading and nothing for writing, and bigBufs lets go of
// the buffers no burst needed for a whole garbage collection cycle.

const (
	bigBufSize   = 64 << 10 // while a burst streams: one system call per 64 KiB of frames
	smallBufSize = 4 << 10  // an idle connection's read buffer: a few small frames
)

// bigBufs is the process's free list of big buffers.
var bigBufs = newBufList()

// bufList is a free list of big buffers, last in first out, shared by every connection. It is
// not a sync.Pool: a pool keeps a buffer put on one P out of reach of a Get on another (its
// private slot), and as goroutines move between Ps, a stream's pieces missed it often enough to
// allocate a 64 KiB buffer every other push (bench: TestGateAllocBudget, 48 KB per 1 MiB push
// against 12 KB). After each garbage collection the list drops as many buffers as stayed in it
// the whole cycle before (its low-water mark): those no burst needed.
type bufList struct {
	mu   sync.Mutex
	free []*[]byte // guarded by mu
	low  int       // guarded by mu: the fewest buffers free since the last trim
	// trims counts trims (guarded by mu), for tests.
	trims int
}

func newBufList() *bufList {
	l := &bufList{}
	l.armTrim()
	return l
}

// get takes a buffer from the list, or makes one.
func (l *bufList) get() *[]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.free)
	if n == 0 {
		b := make([]byte, bigBufSize)
		return &b
	}
	b := l.free[n-1]
	l.free[n-1] = nil
	l.free = l.free[:n-1]
	l.low = min(l.low, n-1)
	return b
}

// put gives a buffer back.
func (l *bufList) put(b *[]byte) {
	l.mu.Lock()
	l.free = append(l.free, b)
	l.mu.Unlock()
}

// trim drops the buffers that stayed free since the last trim (the oldest first: the list is
// used from its end).
func (l *bufList) trim() {
	l.mu.Lock()
	defer l.mu.Unlock()
	drop := min(l.low, len(l.free))
	clear(l.free[:drop])
	l.free = append(l.free[:0], l.free[drop:]...)
	if len(l.free) == 0 {
		l.free = nil
	}
	l.low = len(l.free)
	l.trims++
}

// gcSentinel is allocated only to become garbage: its cleanup runs after the collection that
// found it unreachable (not a tiny allocation, which cleanups are not guaranteed for).
type gcSentinel struct{ _ [32]byte }

// armTrim makes trim run after the next garbage collection, and arms itself again from there.
func (l *bufList) armTrim() {
	runtime.AddCleanup(new(gcSentinel), func(l *bufList) {
		l.trim()
		l.armTrim()
	}, l)
}

var errNegativeDiscard = errors.New("h2grpc: negative discard")

// connReader is a buffered reader for one connection's reader goroutine (not safe for
// concurrent use) with the methods the frame reader needs. It fills from a small buffer of its
// own, and from a pooled 64 KiB one when the previous fill brought smallBufSize or more (a burst
// is arriving); the big buffer goes back to the pool before a fill that follows a short one, so
// the read a quiet connection blocks in holds only the small buffer.
type connReader struct {
	rd    io.Reader
	buf   []byte // the active buffer: small[:] or *big
	big   *[]byte
	r, w  int
	err   error
	last  int // bytes brought by the previous fill (or direct read)
	small [smallBufSize]byte
}

func newConnReader(rd io.Reader) *connReader {
	c := &connReader{rd: rd}
	c.buf = c.small[:]
	return c
}

// Buffered is the number of bytes that can be read without reading from the connection.
func (c *connReader) Buffered() int { return c.w - c.r }

// fill reads once into an empty buffer, choosing the buffer by the size of the previous fill.
func (c *connReader) fill() error {
	if c.err != nil {
		return c.readErr()
	}
	c.r, c.w = 0, 0
	switch {
	case c.last >= smallBufSize && c.big == nil:
		c.big = bigBufs.get()
		c.buf = *c.big
	case c.last < smallBufSize && c.big != nil:
		c.buf = c.small[:]
		bigBufs.put(c.big)
		c.big = nil
	}
	for range 100 {
		n, err := c.rd.Read(c.buf)
		if n < 0 || n > len(c.buf) {
			return errors.New("h2grpc: invalid read count")
		}
		c.w, c.last = n, n
		if err != nil {
			c.err = err
		}
		if n > 0 {
			return nil
		}
		if err != nil {
			return c.readErr()
		}
	}
	return io.ErrNoProgress
}

func (c *connReader) readErr() error {
	err := c.err
	c.err = nil
	c.release()
	return err
}

// release gives the big buffer back once nothing is buffered in it.
func (c *connReader) release() {
	if c.big != nil && c.r == c.w {
		c.buf = c.small[:]
		bigBufs.put(c.big)
		c.big = nil
	}
}

// Read reads into p: from the buffer, or straight from the connection when the buffer is empty
// and p is at least as large as it (a DATA payload), as bufio does.
func (c *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		if c.Buffered() > 0 {
			return 0, nil
		}
		return 0, c.readErr()
	}
	if c.r == c.w {
		if len(p) >= len(c.buf) {
			if c.err != nil {
				return 0, c.readErr()
			}
			n, err := c.rd.Read(p)
			if n < 0 || n > len(p) {
				return 0, errors.New("h2grpc: invalid read count")
			}
			c.last = n
			return n, err
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf[c.r:c.w])
	c.r += n
	return n, nil
}

// ReadByte reads one byte.
func (c *connReader) ReadByte() (byte, error) {
	if c.r == c.w {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	b := c.buf[c.r]
	c.r++
	return b, nil
}

// Discard skips the next n bytes.
func (c *connReader) Discard(n int) (int, error) {
	if n < 0 {
		return 0, errNegativeDiscard
	}
	done := 0
	for done < n {
		if c.r == c.w {
			if err := c.fill(); err != nil {
				return done, err
			}
		}
		k := min(n-done, c.w-c.r)
		c.r += k
		done += k
	}
	return done, nil
}

// connWriter buffers one connection's frames (its user holds the connection's write lock). The
// buffer is borrowed from the pool at the first write after a flush and given back by the flush
// that empties it, so a connection between bursts holds none.
type connWriter struct {
	wr  io.Writer
	big *[]byte
	n   int
	err error
}

func newConnWriter(wr io.Writer) *connWriter { return &connWriter{wr: wr} }

// Buffered is the number of bytes written and not yet flushed.
func (c *connWriter) Buffered() int { return c.n }

// Write buffers p, writing the buffer out whenever it fills; a write at least as large as the
// buffer finding it empty goes straight to the connection.
func (c *connWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if c.err != nil {
			return written, c.err
		}
		if c.n == 0 && len(p) >= bigBufSize {
			n, err := c.wr.Write(p)
			if err != nil {
				c.err = err
			}
			written += n
			p = p[n:]
			continue
		}
		if c.big == nil {
			c.big = bigBufs.get()
		}
		k := copy((*c.big)[c.n:], p)
		c.n += k
		written += k
		p = p[k:]
		if c.n == bigBufSize {
			if err := c.writeOut(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// WriteString is Write for a string (the client preface).
func (c *connWriter) WriteString(s string) (int, error) { return c.Write([]byte(s)) }

// Flush writes out what is buffered and gives the buffer back.
func (c *connWriter) Flush() error {
	if c.err != nil {
		return c.err
	}
	if err := c.writeOut(); err != nil {
		return err
	}
	if c.big != nil {
		bigBufs.put(c.big)
		c.big = nil
	}
	return nil
}

func (c *connWriter) writeOut() error {
	if c.n == 0 {
		return nil
	}
	n, err := c.wr.Write((*c.big)[:c.n])
	if err == nil && n < c.n {
		err = io.ErrShortWrite
	}
	if err != nil {
		c.err = err
		return err
	}
	c.n = 0
	return nil
}
