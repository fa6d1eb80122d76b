package certs

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// sdsServiceDesc is envoy.service.secret.v3.SecretDiscoveryService served over encoded messages
// (rawCodec): StreamSecrets is the agent's; DeltaSecrets and FetchSecrets answer Unimplemented with
// the messages generated servers give.
var sdsServiceDesc = grpc.ServiceDesc{
	ServiceName: "envoy.service.secret.v3.SecretDiscoveryService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "FetchSecrets",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var b []byte
			if err := dec(&b); err != nil {
				return nil, err
			}
			if err := parseRequest(b, &sdsRequest{}); err != nil {
				return nil, status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
			}
			return nil, status.Error(codes.Unimplemented, "method FetchSecrets not implemented")
		},
	}},
	Streams: []grpc.StreamDesc{
		{StreamName: "DeltaSecrets", ServerStreams: true, ClientStreams: true,
			Handler: func(any, grpc.ServerStream) error {
				return status.Error(codes.Unimplemented, "method DeltaSecrets not implemented")
			}},
		{StreamName: "StreamSecrets", ServerStreams: true, ClientStreams: true,
			Handler: func(srv any, ss grpc.ServerStream) error {
				return srv.(*Server).streamSecrets(grpcSDSConn{ss})
			}},
	},
	Metadata: "envoy/service/secret/v3/sds.proto",
}

// grpcSDSConn adapts a gRPC server stream using rawCodec to sdsConn.
type grpcSDSConn struct{ ss grpc.ServerStream }

func (c grpcSDSConn) Context() context.Context { return c.ss.Context() }

func (c grpcSDSConn) Recv() ([]byte, error) {
	var b []byte
	if err := c.ss.RecvMsg(&b); err != nil {
		return nil, err
	}
	return b, nil
}

func (c grpcSDSConn) Send(resp []byte) error { return c.ss.SendMsg(&resp) }

// rawCodec is a gRPC CodecV2 for *[]byte holding encoded messages. Its name is "proto", so
// clients see the ordinary application/grpc+proto. Messages are small (a request names a few
// secrets; a response holds a few PEMs), so received bytes are copied out of gRPC's buffers.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

// Marshal hands the bytes to gRPC without copying: the sender never modifies them afterwards.
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("certs: SDS codec cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("certs: SDS codec cannot unmarshal into %T", v)
	}
	*b = data.Materialize()
	return nil
}
