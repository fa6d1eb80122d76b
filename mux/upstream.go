package mux

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/wingman-mesh/wingman/fastpath"
	istiodc "github.com/wingman-mesh/wingman/internal/istiod" // mux tests declare an istiod stand-in
)

const (
	adsService  = "envoy.service.discovery.v3.AggregatedDiscoveryService"
	sotwMethod  = "/" + adsService + "/StreamAggregatedResources"
	deltaMethod = "/" + adsService + "/DeltaAggregatedResources"
)

// upstreamStream is what a session needs of an upstream stream.
type upstreamStream interface {
	SendMsg(any) error
	RecvMsg(any) error
}

// opener opens upstream streams; the real one shares one grpc.ClientConn.
type opener interface {
	open(ctx context.Context, delta bool) (upstreamStream, error)
}

// grpcUpstream is the one connection to Istiod. Immutable after dialUpstream.
type grpcUpstream struct {
	cc       *grpc.ClientConn
	callOpts []grpc.CallOption
}

var _ opener = (*grpcUpstream)(nil)

// dialUpstream connects to Istiod as internal/istiod does for every part of the agent, with the
// proxy's own backoff, message limits and window sizes.
func dialUpstream(cfg *Config) (*grpcUpstream, error) {
	cc, err := istiodc.Dial(cfg.Upstream,
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: cfg.Backoff.Base, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.Backoff.Max},
			MinConnectTimeout: 5 * time.Second,
		}),
		// Large windows and buffers: a multi-megabyte push crosses in a few system calls and
		// without waiting for window updates. They bound what Istiod may send unread; the
		// proxy reads continuously, and its own queues are bounded separately.
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithReadBufferSize(ioBuffer),
		grpc.WithWriteBufferSize(ioBuffer),
	)
	if err != nil {
		return nil, fmt.Errorf("mux: upstream: %w", err)
	}
	cc.Connect() // dial now, so the first stream finds the connection ready
	return &grpcUpstream{cc: cc, callOpts: []grpc.CallOption{
		grpc.ForceCodecV2(fastpath.Codec{}),
		grpc.WaitForReady(true),
		grpc.MaxCallRecvMsgSize(cfg.MaxMessageBytes),
		grpc.MaxCallSendMsgSize(cfg.MaxMessageBytes),
	}}, nil
}

var (
	sotwDesc  = &grpc.StreamDesc{StreamName: "StreamAggregatedResources", ServerStreams: true, ClientStreams: true}
	deltaDesc = &grpc.StreamDesc{StreamName: "DeltaAggregatedResources", ServerStreams: true, ClientStreams: true}
)

func (g *grpcUpstream) open(ctx context.Context, delta bool) (upstreamStream, error) {
	if delta {
		return g.cc.NewStream(ctx, deltaDesc, deltaMethod, g.callOpts...)
	}
	return g.cc.NewStream(ctx, sotwDesc, sotwMethod, g.callOpts...)
}

func (g *grpcUpstream) close() error { return g.cc.Close() }
