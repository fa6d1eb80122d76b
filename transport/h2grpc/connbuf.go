package h2grpc

import (
	"errors"
	"io"
	"sync"
)

// A connection's read and write buffers are large only while data flows. Every connection the
// agent holds (to Istiod, from Envoy for xDS and for SDS) is idle nearly all the time, and a
// pair of 64 KiB bufio buffers per connection was the largest part of an idle agent's live heap
// (about 400 KiB of 1.9 MiB, three connections). connReader and connWriter borrow their large
// buffer from bigBufs while bytes stream through and give it back when a burst is over, so an
// idle connection holds smallBufSize for reading and nothing for writing.

const (
	bigBufSize   = 64 << 10 // while a burst streams: one system call per 64 KiB of frames
	smallBufSize = 4 << 10  // an idle connection's read buffer: a few small frames
)

// bigBufs holds the big buffers between bursts, for every connection of the process; the
// runtime lets go of those no burst took for two collections.
//
// A sync.Pool, because nothing else measured better in the real binary (issue 29, item 4).
// This was a free list of its own, trimmed after every garbage collection by a cleanup that
// re-armed itself, kept for a bench figure (bytes per push). In the perf harness (`go run
// ./perf/cmd/perf -agent BIN -runs 3 -scenarios startup,large_4mb,many_1500`, two rounds of the
// three builds interleaved, 2026-12-06, shared 2-core machine) pool and list gave the same
// figures within the runs' spread: large_4mb 126-127 against 124-125 KB allocated per MB, CPU
// 1.92-2.04 against 1.91-1.92 ms per MB, anonymous memory above idle during pushes 2.9 against
// 2.8-2.9 MiB, idle 3.1-3.2 MiB for both; many_1500 alike (442-446 KB per MB, 2.7-2.9 ms per
// MB). A plain allocation per burst: 3.0-3.1 MB allocated and 5.5-5.6 ms CPU per MB, 6.4-7.0
// MiB above idle during pushes, 3.9 MiB idle in large_4mb.
var bigBufs = sync.Pool{New: func() any {
	b := make([]byte, bigBufSize)
	return &b
}}

func getBigBuf() *[]byte  { return bigBufs.Get().(*[]byte) }
func putBigBuf(b *[]byte) { bigBufs.Put(b) }

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
		c.big = getBigBuf()
		c.buf = *c.big
	case c.last < smallBufSize && c.big != nil:
		c.buf = c.small[:]
		putBigBuf(c.big)
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
		putBigBuf(c.big)
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
			c.big = getBigBuf()
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
		putBigBuf(c.big)
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
