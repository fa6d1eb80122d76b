package h2grpc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// TestWriteBehindConn: bytes arrive whole and in order; a peer that does not read blocks
// Write once writeBehindMax bytes wait; Close unblocks it; a write error reaches the writer.
func TestWriteBehindConn(t *testing.T) {
	t.Run("order", func(t *testing.T) {
		a, b := net.Pipe()
		w := newWriteBehindConn(a)
		want := pattern(1<<20+17, 4)
		got := make(chan []byte)
		go func() {
			buf, _ := io.ReadAll(io.LimitReader(b, int64(len(want))))
			got <- buf
		}()
		for off := 0; off < len(want); off += 1000 {
			if _, err := w.Write(want[off:min(off+1000, len(want))]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(<-got, want) {
			t.Fatal("bytes differ")
		}
		w.Close()
		b.Close()
	})
	t.Run("blocks and Close unblocks", func(t *testing.T) {
		a, b := net.Pipe() // synchronous: nothing is taken unless b reads
		w := newWriteBehindConn(a)
		wrote := make(chan error, 1)
		go func() {
			_, err := w.Write(make([]byte, 3*writeBehindMax))
			wrote <- err
		}()
		// The writer goroutine holds one buffer in its write(2) to the pipe and one more
		// fills: Write cannot finish before Close.
		one := make([]byte, 1)
		if _, err := io.ReadFull(b, one); err != nil { // the first write(2) has started
			t.Fatal(err)
		}
		w.Close()
		// net.ErrClosed, or the pipe's own error when the write(2) in progress failed first.
		if err := <-wrote; !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("Write blocked at Close: %v, want a closed-connection error", err)
		}
		b.Close()
	})
	t.Run("write error", func(t *testing.T) {
		a, b := net.Pipe()
		w := newWriteBehindConn(a)
		b.Close() // the peer is gone: the writer goroutine's write fails
		var err error
		for err == nil {
			_, err = w.Write(make([]byte, 1000))
		}
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("Write after the peer closed: %v", err)
		}
		w.Close()
	})
}
