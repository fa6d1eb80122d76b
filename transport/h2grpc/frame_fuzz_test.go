package h2grpc

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readMessages reads length-prefixed messages from a byte stream the way both ends do:
// readPrefix, then exactly size bytes. It returns the bodies and how the stream ended.
func readMessages(r io.Reader, max int) ([][]byte, error) {
	var out [][]byte
	var hdr [prefixLen]byte
	for {
		size, err := readPrefix(r, &hdr, max)
		if err != nil {
			return out, err
		}
		body := make([]byte, size)
		if n, err := io.ReadFull(r, body); err != nil {
			return out, errTruncated(n, size)
		}
		out = append(out, body)
	}
}

// oneByteReader returns at most one byte a Read, as a transport may.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

// FuzzReadMessages feeds outside bytes to the message-prefix reader. Whatever the input: no
// panic; the stream ends in io.EOF or a status error of a code the peer could cause; the
// messages read are exactly a prefix of the input re-framed; one-byte reads give the same
// result as whole reads.
func FuzzReadMessages(f *testing.F) {
	f.Add([]byte{}, 16)
	f.Add(prefixed(0, 0, nil), 16)
	f.Add(prefixed(0, 3, []byte("abc")), 16)
	f.Add(append(prefixed(0, 1, []byte("a")), prefixed(0, 2, []byte("bc"))...), 16)
	f.Add(prefixed(1, 1, []byte("x")), 16)
	f.Add(prefixed(0, 17, make([]byte, 17)), 16)
	f.Add([]byte{0, 0, 0}, 16)
	f.Add(prefixed(0, 10, []byte("abc")), 16)
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff}, 1<<20)
	f.Add(prefixed(2, 0, nil), 16)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max < 0 || max > 1<<20 {
			max = 1 << 20
		}
		msgs, err := readMessages(bytes.NewReader(in), max)
		var re []byte
		for _, m := range msgs {
			if len(m) > max {
				t.Fatalf("message of %d bytes over max %d", len(m), max)
			}
			re = append(re, prefixed(0, len(m), m)...)
		}
		if !bytes.HasPrefix(in, re) {
			t.Fatal("messages read are not the input's start")
		}
		if errors.Is(err, io.EOF) {
			if len(re) != len(in) {
				t.Fatalf("io.EOF with %d of %d bytes read", len(re), len(in))
			}
		} else {
			st, ok := status.FromError(err)
			if !ok {
				t.Fatalf("error %v is not a status", err)
			}
			if c := st.Code(); c != codes.Internal && c != codes.ResourceExhausted {
				t.Fatalf("code %v", c)
			}
		}
		msgs1, err1 := readMessages(oneByteReader{bytes.NewReader(in)}, max)
		if len(msgs1) != len(msgs) || status.Code(err1) != status.Code(err) || (err == io.EOF) != (err1 == io.EOF) {
			t.Fatalf("one-byte reads: %d messages, %v; whole reads: %d, %v", len(msgs1), err1, len(msgs), err)
		}
	})
}
