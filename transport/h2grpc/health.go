package h2grpc

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// The gRPC health checking protocol (grpc.health.v1, grpc/grpc-proto's health.proto, the
// service kubelet's gRPC probe and Istio's agent call): one unary method whose request carries
// service = 1 (string) and whose response carries status = 1 (enum ServingStatus). The messages
// are written and read here on the wire: the generated package links grpc-go's client.
const healthCheckMethod = "/grpc.health.v1.Health/Check"

// HealthStatus is grpc.health.v1.HealthCheckResponse.ServingStatus.
type HealthStatus int32

// The values of health.proto's ServingStatus.
const (
	HealthUnknown        HealthStatus = 0
	HealthServing        HealthStatus = 1
	HealthNotServing     HealthStatus = 2
	HealthServiceUnknown HealthStatus = 3 // used only by the Watch method
)

// String is the enum value's name in health.proto, or its number for a value the proto does not
// name (an open proto3 enum keeps it, and protobuf-go's String prints it so).
func (s HealthStatus) String() string {
	switch s {
	case HealthUnknown:
		return "UNKNOWN"
	case HealthServing:
		return "SERVING"
	case HealthNotServing:
		return "NOT_SERVING"
	case HealthServiceUnknown:
		return "SERVICE_UNKNOWN"
	}
	return strconv.Itoa(int(s))
}

// HealthCheck calls grpc.health.v1.Health/Check for service ("" is the server as a whole) and
// returns the status the server reports. Errors are the call's status (see Unary); a response
// that is not a HealthCheckResponse is Internal, as grpc-go reports a message it cannot
// unmarshal.
func (c *Client) HealthCheck(ctx context.Context, service string) (HealthStatus, error) {
	resp, err := c.Unary(ctx, healthCheckMethod, appendHealthCheckRequest(nil, service))
	if err != nil {
		return HealthUnknown, err
	}
	st, err := parseHealthCheckResponse(resp)
	if err != nil {
		return HealthUnknown, unmarshalError(err)
	}
	return st, nil
}

// appendHealthCheckRequest appends grpc.health.v1.HealthCheckRequest{service} to b.
func appendHealthCheckRequest(b []byte, service string) []byte {
	if service == "" { // proto3: an empty string is not written
		return b
	}
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendString(b, service)
}

// parseHealthCheckResponse reads grpc.health.v1.HealthCheckResponse as protobuf-go's
// proto.Unmarshal reads it (FuzzHealthCheckResponse compares the two): the last status field
// wins, its varint truncated to 32 bits; fields of other numbers, and a status field of another
// wire type, are skipped as unknown fields; malformed wire data is an error.
func parseHealthCheckResponse(b []byte) (HealthStatus, error) {
	var st HealthStatus
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber { // ConsumeTag checks only the lower bound
			return 0, fmt.Errorf("field number %d out of range", num)
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, protowire.ParseError(n)
			}
			st = HealthStatus(int32(v))
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return st, nil
}

// unmarshalError is the status of a response that does not decode: Internal, as grpc-go's.
func unmarshalError(err error) error {
	return status.Errorf(codes.Internal, "h2grpc: failed to unmarshal the response: %v", err)
}
