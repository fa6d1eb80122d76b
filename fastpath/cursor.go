package fastpath

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/mem"
)

// Wire types of the protobuf encoding.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireStart   = 3
	wireEnd     = 4
	wireFixed32 = 5
)

// ErrTruncated reports a message that ends inside a field.
var ErrTruncated = errors.New("fastpath: message truncated")

// errOverflow reports a varint longer than 10 bytes.
var errOverflow = errors.New("fastpath: varint overflows 64 bits")

// Cursor reads protobuf wire data from a [mem.BufferSlice] without copying it, across buffer
// boundaries. The zero Cursor is empty. A Cursor is a value: copying it forks the position.
// It is not safe for concurrent use.
type Cursor struct {
	bufs mem.BufferSlice
	idx  int    // index of the buffer holding cur
	cur  []byte // unread part of bufs[idx]
	left int    // bytes left before the cursor's limit
}

// NewCursor returns a cursor over all of data.
func NewCursor(data mem.BufferSlice) Cursor {
	c := Cursor{bufs: data, idx: -1, left: data.Len()}
	c.advance()
	return c
}

// BytesCursor returns a cursor over one contiguous byte slice.
func BytesCursor(b []byte) Cursor {
	return Cursor{idx: 0, cur: b, left: len(b)}
}

// advance moves cur to the next non-empty buffer when cur is exhausted.
func (c *Cursor) advance() {
	for len(c.cur) == 0 && c.idx+1 < len(c.bufs) {
		c.idx++
		c.cur = c.bufs[c.idx].ReadOnlyData()
	}
}

// Len is the number of bytes left to read.
func (c *Cursor) Len() int { return c.left }

// readByte returns the next byte.
func (c *Cursor) readByte() (byte, error) {
	if c.left <= 0 {
		return 0, ErrTruncated
	}
	c.advance()
	if len(c.cur) == 0 {
		return 0, ErrTruncated
	}
	b := c.cur[0]
	c.cur = c.cur[1:]
	c.left--
	return b, nil
}

// Varint reads a base-128 varint.
func (c *Cursor) Varint() (uint64, error) {
	// Fast path: the whole varint is in the current buffer.
	if len(c.cur) >= 10 && c.left >= 10 {
		var v uint64
		for i := 0; i < 10; i++ {
			b := c.cur[i]
			v |= uint64(b&0x7f) << (7 * i)
			if b < 0x80 {
				c.cur = c.cur[i+1:]
				c.left -= i + 1
				return v, nil
			}
		}
		return 0, errOverflow
	}
	var v uint64
	for i := 0; i < 10; i++ {
		b, err := c.readByte()
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, errOverflow
}

// Skip discards n bytes.
func (c *Cursor) Skip(n int) error {
	if n < 0 || n > c.left {
		return ErrTruncated
	}
	c.left -= n
	for n > 0 {
		c.advance()
		if len(c.cur) == 0 {
			return ErrTruncated
		}
		k := min(n, len(c.cur))
		c.cur = c.cur[k:]
		n -= k
	}
	return nil
}

// Field number bounds, as protobuf-go decodes: a message's own fields go up to 2^29-1; a key
// inside a skipped group is read as an unknown field's, which it accepts up to MaxInt32.
const (
	maxField      = 1<<29 - 1
	maxGroupField = 1<<31 - 1
)

// Next reads a field key. It returns the field number and wire type; done is true at the end.
func (c *Cursor) Next() (field int, wt int, done bool, err error) {
	return c.next(maxField)
}

func (c *Cursor) next(limit uint64) (field int, wt int, done bool, err error) {
	if c.left == 0 {
		return 0, 0, true, nil
	}
	k, err := c.Varint()
	if err != nil {
		return 0, 0, false, err
	}
	field, wt = int(k>>3), int(k&7)
	if field <= 0 || k>>3 > limit {
		return 0, 0, false, fmt.Errorf("fastpath: invalid field number %d", k>>3)
	}
	return field, wt, false, nil
}

// Length reads the length prefix of a bytes field and checks it against what is left.
func (c *Cursor) Length() (int, error) {
	n, err := c.Varint()
	if err != nil {
		return 0, err
	}
	if n > uint64(c.left) {
		return 0, ErrTruncated
	}
	return int(n), nil
}

// SkipValue discards the value of a field of wire type wt whose key was just read.
func (c *Cursor) SkipValue(wt int) error {
	switch wt {
	case wireVarint:
		_, err := c.Varint()
		return err
	case wireFixed64:
		return c.Skip(8)
	case wireFixed32:
		return c.Skip(4)
	case wireBytes:
		n, err := c.Length()
		if err != nil {
			return err
		}
		return c.Skip(n)
	case wireStart:
		return c.skipGroup()
	default:
		return fmt.Errorf("fastpath: unexpected wire type %d", wt)
	}
}

// skipGroup skips a (deprecated) group up to its matching end marker, with bounded depth.
func (c *Cursor) skipGroup() error {
	depth := 1
	for depth > 0 {
		_, wt, done, err := c.next(maxGroupField)
		if err != nil {
			return err
		}
		if done {
			return ErrTruncated
		}
		switch wt {
		case wireStart:
			depth++
			if depth > 64 {
				return errors.New("fastpath: groups nested too deep")
			}
		case wireEnd:
			depth--
		default:
			if err := c.SkipValue(wt); err != nil {
				return err
			}
		}
	}
	return nil
}

// Sub returns a cursor over the next n bytes and advances c past them.
func (c *Cursor) Sub(n int) (Cursor, error) {
	if n < 0 || n > c.left {
		return Cursor{}, ErrTruncated
	}
	sub := *c
	sub.left = n
	if err := c.Skip(n); err != nil {
		return Cursor{}, err
	}
	return sub, nil
}

// Bytes returns the next n bytes. When they lie in one buffer it returns a view of it (no copy);
// otherwise it copies them into scratch (grown if too small) and returns that. The result is only
// valid until scratch or the underlying buffers are reused.
func (c *Cursor) Bytes(n int, scratch *[]byte) ([]byte, error) {
	if n < 0 || n > c.left {
		return nil, ErrTruncated
	}
	c.advance()
	if n <= len(c.cur) {
		b := c.cur[:n:n]
		c.cur = c.cur[n:]
		c.left -= n
		return b, nil
	}
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	dst := (*scratch)[:n]
	off := 0
	for off < n {
		c.advance()
		if len(c.cur) == 0 {
			return nil, ErrTruncated
		}
		k := copy(dst[off:], c.cur)
		c.cur = c.cur[k:]
		off += k
	}
	c.left -= n
	return dst, nil
}
