package mux

import (
	"context"
	"fmt"

	"google.golang.org/grpc/mem"

	"github.com/wingman-mesh/wingman/transport/h2grpc"
	istiodc "github.com/wingman-mesh/wingman/transport/istiod" // mux tests declare an istiod stand-in
)

const (
	adsService  = "envoy.service.discovery.v3.AggregatedDiscoveryService"
	sotwMethod  = "/" + adsService + "/StreamAggregatedResources"
	deltaMethod = "/" + adsService + "/DeltaAggregatedResources"
)

// upstreamStream is what a session needs of an upstream stream (an h2grpc.ClientStream): whole
// requests out, responses in as a length and then their bytes, read in pieces.
type upstreamStream interface {
	SendMsg(mem.BufferSlice) error
	RecvMsgHeader() (size int, err error)
	Read(p []byte) (int, error)
	Close()
}

// opener opens upstream streams; the real one shares one HTTP/2 connection.
type opener interface {
	open(ctx context.Context, delta bool) (upstreamStream, error)
}

// h2Upstream is the one connection to Istiod: gRPC over transport/h2grpc's own HTTP/2
// connection (x/net/http2's framer and hpack, not net/http), since grpc-go's client hands over
// only whole messages. It has the TLS
// policy and per-call metadata of transport/istiod. Immutable after dialUpstream.
type h2Upstream struct {
	c *h2grpc.Client
}

var _ opener = (*h2Upstream)(nil)

// dialUpstream prepares the connection to Istiod (dialled on the first stream, redialled when
// lost).
func dialUpstream(cfg *Config) (*h2Upstream, error) {
	tc, err := istiodc.TLSConfig(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("mux: upstream: %w", err)
	}
	c, err := h2grpc.NewClient(h2grpc.ClientConfig{
		Address: cfg.Upstream.Address,
		TLS:     tc,
		Header:  istiodc.StreamHeader(cfg.Upstream),
		// The proxy reads continuously and forwards as it reads, so the windows only need to
		// cover the bandwidth-delay product; they bound what Istiod may send unread.
		StreamWindow:     streamWindow,
		ConnWindow:       connWindow,
		KeepaliveTime:    cfg.Upstream.KeepaliveTime,
		KeepaliveTimeout: cfg.Upstream.KeepaliveTimeout,
		MaxRecvMsgBytes:  cfg.MaxMessageBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("mux: upstream: %w", err)
	}
	return &h2Upstream{c: c}, nil
}

func (u *h2Upstream) open(ctx context.Context, delta bool) (upstreamStream, error) {
	if delta {
		return u.c.Open(ctx, deltaMethod)
	}
	return u.c.Open(ctx, sotwMethod)
}

func (u *h2Upstream) close() error { return u.c.Close() }
