package certs

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/fastpath"
)

// sdsServiceDesc is envoy.service.secret.v3.SecretDiscoveryService served over encoded messages
// (fastpath.Codec): StreamSecrets is the agent's; DeltaSecrets and FetchSecrets answer Unimplemented with
// the messages generated servers give.
var sdsServiceDesc = grpc.ServiceDesc{
	ServiceName: "envoy.service.secret.v3.SecretDiscoveryService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "FetchSecrets",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var f fastpath.Frame
			if err := dec(&f); err != nil {
				return nil, err
			}
			var p fastpath.Peeker
			err := readRequest(&p, f.Data, &sdsRequest{})
			f.Free()
			if err != nil {
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

// grpcSDSConn adapts a gRPC server stream using fastpath.Codec to sdsConn.
type grpcSDSConn struct{ ss grpc.ServerStream }

func (c grpcSDSConn) Context() context.Context { return c.ss.Context() }

func (c grpcSDSConn) Recv() (fastpath.Frame, error) {
	var f fastpath.Frame
	err := c.ss.RecvMsg(&f)
	return f, err
}

// Send hands resp to gRPC without copying: the sender never modifies it afterwards.
func (c grpcSDSConn) Send(resp []byte) error {
	f := fastpath.FrameOf(resp)
	err := c.ss.SendMsg(&f)
	f.Free()
	return err
}
