package h2grpc

import (
	"context"
	"io"
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Unary makes one unary call of method (e.g.
// "/istio.v1.auth.IstioCertificateService/CreateCertificate"): a stream carrying req and the
// half-close, then exactly one response message and the trailers. The answer is the response's
// bytes, or the call's status as an error: the server's (grpc-status from the trailers, or a
// trailers-only response), codes.Unavailable for a transport failure, the context's code
// (DeadlineExceeded, Canceled) when ctx ends first, Internal when the server answers with no
// message or with more than one (what grpc-go's unary calls report). ctx's deadline goes to the
// server as grpc-timeout, as grpc-go sends it.
func (c *Client) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	s, err := c.Open(ctx, method)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if uint64(len(req)) > math.MaxUint32 {
		return nil, status.Errorf(codes.ResourceExhausted, "h2grpc: message of %d bytes is over the gRPC limit", len(req))
	}
	// The message and the half-close go in one write (END_STREAM on its last DATA frame), as
	// grpc-go's unary calls send them. A send that finds the stream over is answered by the
	// receive below, which says why it ended.
	putPrefix(&s.shdr, len(req))
	pieces := [][]byte{s.shdr[:], req}
	if len(req) == 0 {
		pieces = pieces[:1] // no empty pieces, as SendMsg passes them
	}
	s.h.send(pieces, true)
	s.sendClosed = true
	n, err := s.RecvMsgHeader()
	if err == io.EOF {
		return nil, status.Errorf(codes.Internal, "h2grpc: %s: the server ended the call without a response message", method)
	}
	if err != nil {
		return nil, err
	}
	resp := make([]byte, n)
	if _, err := io.ReadFull(s, resp); err != nil {
		return nil, err
	}
	switch _, err := s.RecvMsgHeader(); err {
	case io.EOF:
		return resp, nil
	case nil:
		return nil, status.Errorf(codes.Internal, "h2grpc: %s: the server sent more than one response message to a unary call", method)
	default:
		return nil, err
	}
}

// Connect dials the connection now unless one is up (or being dialled), so that the first call
// finds it ready; a failure is the dial's status (Unavailable) and the next call dials again.
func (c *Client) Connect(ctx context.Context) error {
	_, err := c.conn(ctx)
	return err
}

// timeoutUnits are the grpc-timeout units, finest first, with their length.
var timeoutUnits = [...]struct {
	d    time.Duration
	unit byte
}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}}

const maxTimeoutValue = 99_999_999 // 8 digits

// encodeTimeout writes d as a grpc-timeout value: at most 8 digits and a unit (gRPC's HTTP/2
// protocol document: TimeoutValue is "positive integer as ASCII string of at most 8 digits",
// units H, M, S, m, u, n); the smallest unit the value fits in is used, rounded up so the
// server never gives up earlier than the client. A deadline already past is sent as 1n: the
// stream ends at once on the client's side anyway.
func encodeTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	for _, u := range timeoutUnits {
		v := d / u.d
		if d%u.d != 0 {
			v++ // rounded up
		}
		if v <= maxTimeoutValue {
			return strconv.FormatInt(int64(v), 10) + string(u.unit)
		}
	}
	return strconv.Itoa(maxTimeoutValue) + "H" // beyond 11,415 years
}
