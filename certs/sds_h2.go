package certs

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/transport/h2grpc"
)

const sdsService = "/envoy.service.secret.v3.SecretDiscoveryService/"

// sdsRoutes serve envoy.service.secret.v3.SecretDiscoveryService over encoded messages, on the
// transport the xDS proxy uses (transport/h2grpc): StreamSecrets is the agent's; DeltaSecrets and
// FetchSecrets answer Unimplemented with the messages generated servers give (FetchSecrets reads
// its request first, as a generated server decodes it before calling the method).
func (s *Server) sdsRoutes() map[string]h2grpc.Handler {
	return map[string]h2grpc.Handler{
		sdsService + "StreamSecrets": func(ss *h2grpc.ServerStream) error { return s.streamSecrets(h2SDSConn{ss}) },
		sdsService + "DeltaSecrets": func(*h2grpc.ServerStream) error {
			return status.Error(codes.Unimplemented, "method DeltaSecrets not implemented")
		},
		sdsService + "FetchSecrets": func(ss *h2grpc.ServerStream) error {
			data, err := ss.RecvMsg()
			if err != nil {
				return err
			}
			var p fastpath.Peeker
			err = readRequest(&p, data, &sdsRequest{})
			data.Free()
			if err != nil {
				return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
			}
			return status.Error(codes.Unimplemented, "method FetchSecrets not implemented")
		},
	}
}

// h2SDSConn adapts an h2grpc server stream to sdsConn.
type h2SDSConn struct{ ss *h2grpc.ServerStream }

func (c h2SDSConn) Context() context.Context { return c.ss.Context() }

func (c h2SDSConn) Recv() (fastpath.Frame, error) {
	data, err := c.ss.RecvMsg()
	return fastpath.Frame{Data: data}, err
}

// Send hands resp to the transport without copying: the sender never modifies it afterwards.
func (c h2SDSConn) Send(resp []byte) error {
	return c.ss.SendMsg(mem.BufferSlice{mem.SliceBuffer(resp)})
}
