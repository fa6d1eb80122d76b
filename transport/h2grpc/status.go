package h2grpc

import (
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// encodeGrpcMessage percent-encodes a status message as the gRPC HTTP/2 protocol document
// (PROTOCOL-HTTP2.md, "Status-Message") says: bytes outside printable ASCII 0x20-0x7E, and '%'
// itself, become %XX of their UTF-8 encoding. Messages without such bytes come back as they are.
func encodeGrpcMessage(msg string) string {
	i := 0
	for i < len(msg) && !needsEscape(msg[i]) {
		i++
	}
	if i == len(msg) {
		return msg
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(msg) + 16)
	b.WriteString(msg[:i])
	for ; i < len(msg); i++ {
		c := msg[i]
		if needsEscape(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func needsEscape(c byte) bool { return c < 0x20 || c > 0x7E || c == '%' }

// decodeGrpcMessage undoes encodeGrpcMessage. The protocol document asks a receiver not to fail
// on a bad encoding: a '%' not followed by two hex digits is kept literally.
func decodeGrpcMessage(msg string) string {
	if !strings.Contains(msg, "%") {
		return msg
	}
	var b strings.Builder
	b.Grow(len(msg))
	for i := 0; i < len(msg); i++ {
		if msg[i] == '%' && i+2 < len(msg) {
			if v, err := strconv.ParseUint(msg[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(msg[i])
	}
	return b.String()
}

// statusFromHeader reads grpc-status and grpc-message from trailers (or the headers of a
// trailers-only response). ok is false when there is no grpc-status at all.
func statusFromHeader(h http.Header) (st *status.Status, ok bool) {
	v := h.Values("Grpc-Status")
	if len(v) == 0 {
		return nil, false
	}
	code, err := strconv.ParseUint(v[0], 10, 32)
	if err != nil {
		// grpc-go's client: Unknown, "transport: malformed grpc-status".
		return status.Newf(codes.Unknown, "transport: malformed grpc-status: %q", v[0]), true
	}
	return status.New(codes.Code(code), decodeGrpcMessage(h.Get("Grpc-Message"))), true
}

// httpStatusCode maps a non-200 HTTP status of a response to a gRPC code the way grpc-go's
// client does (internal/transport/http_util.go HTTPStatusConvTab, which follows gRPC's
// doc/http-grpc-status-mapping.md): anything else is Unknown.
func httpStatusCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return codes.Internal
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}

// rstCode maps an HTTP/2 RST_STREAM error code to a gRPC code as grpc-go does
// (internal/transport/http_util.go http2ErrConvTab).
func rstCode(c uint32) codes.Code {
	switch c {
	case 0x3, 0xb: // FLOW_CONTROL_ERROR, ENHANCE_YOUR_CALM
		return codes.ResourceExhausted
	case 0x7: // REFUSED_STREAM
		return codes.Unavailable
	case 0x8: // CANCEL
		return codes.Canceled
	case 0xc: // INADEQUATE_SECURITY
		return codes.PermissionDenied
	}
	return codes.Internal
}

// isGRPCContentType reports whether a content-type names gRPC: "application/grpc" alone or
// followed by "+subtype" or ";parameters" (gRPC PROTOCOL-HTTP2.md, "Content-Type"; grpc-go's
// grpcutil.ContentSubtype).
func isGRPCContentType(ct string) bool {
	const base = "application/grpc"
	if len(ct) < len(base) || !strings.EqualFold(ct[:len(base)], base) {
		return false
	}
	return len(ct) == len(base) || ct[len(base)] == '+' || ct[len(base)] == ';'
}
