package h2grpc

import (
	"encoding/binary"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// prefixLen is the length of the prefix before every gRPC message: one flags byte (bit 0:
// compressed) and the message length as a big-endian uint32 (gRPC PROTOCOL-HTTP2.md,
// "Length-Prefixed-Message").
const prefixLen = 5

// putPrefix writes an uncompressed message's prefix.
func putPrefix(hdr *[prefixLen]byte, size int) {
	hdr[0] = 0
	binary.BigEndian.PutUint32(hdr[1:], uint32(size))
}

// readPrefix reads the next message's prefix from r into hdr and returns the message length.
// It returns io.EOF when r ends cleanly before the prefix's first byte, and a status error for
// everything the peer got wrong, with grpc-go's codes and wording (rpc_util.go recvMsg,
// checkRecvPayload): a truncated prefix is Internal, a compressed message Internal (we never
// advertise compression; grpc-go's server says Unimplemented when the request named an
// encoding, see server), an unknown flags byte Internal, a length over max ResourceExhausted.
// Errors of r itself come back unchanged (wrapped by the caller).
func readPrefix(r io.Reader, hdr *[prefixLen]byte, max int) (int, error) {
	// Not io.ReadFull: it cannot tell a stream that ended cleanly inside the prefix (our
	// "truncated") from a reader that failed with io.ErrUnexpectedEOF itself, which is how
	// net/http's transport reports a lost connection.
	for n := 0; n < prefixLen; {
		m, err := r.Read(hdr[n:])
		n += m
		if err == nil || n == prefixLen {
			continue
		}
		if err == io.EOF {
			if n == 0 {
				return 0, io.EOF
			}
			return 0, status.Errorf(codes.Internal, "grpc: stream ended inside a message prefix (%d of %d bytes)", n, prefixLen)
		}
		return 0, err
	}
	switch hdr[0] {
	case 0:
	case 1:
		return 0, errCompressed
	default:
		return 0, status.Errorf(codes.Internal, "grpc: received unexpected payload format %d", hdr[0])
	}
	size := binary.BigEndian.Uint32(hdr[1:])
	if uint64(size) > uint64(max) {
		return 0, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", size, max)
	}
	return int(size), nil
}

// errCompressed is returned for a message with the compressed flag: we never advertise an
// encoding, so the peer may not compress (grpc-go: "compressed flag set with identity or empty
// encoding").
var errCompressed = status.Error(codes.Internal, "grpc: compressed flag set with identity or empty encoding")

// errTruncated is the status of a stream that ended inside a message body.
func errTruncated(got, want int) error {
	return status.Errorf(codes.Internal, "grpc: stream ended inside a message (%d of %d bytes)", got, want)
}
