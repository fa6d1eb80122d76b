package bench

import (
	"context"
	"errors"
	"io"
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// RefProxy is the reference: a state-of-the-world ADS proxy built the way Istio's agent is.
// Immutable after creation.
type RefProxy struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	Upstream string // plaintext host:port
	MaxBytes int
}

// StreamAggregatedResources dials a new connection to the upstream for this stream, as Istio's
// agent does, and copies decoded messages both ways until either side ends.
func (r *RefProxy) StreamAggregatedResources(down discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	cc, err := grpc.NewClient("passthrough:///"+r.Upstream, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(r.MaxBytes), grpc.MaxCallSendMsgSize(r.MaxBytes)))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	up, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			req, err := down.Recv()
			if err != nil {
				errc <- err
				return
			}
			if err := up.Send(req); err != nil {
				errc <- err
				return
			}
		}
	})
	wg.Go(func() {
		for {
			resp, err := up.Recv()
			if err != nil {
				errc <- err
				return
			}
			if err := down.Send(resp); err != nil {
				errc <- err
				return
			}
		}
	})
	err = <-errc
	cancel()
	wg.Wait()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
