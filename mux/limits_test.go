package mux

import (
	"context"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/fastpath"
)

// TestDownstreamLimits: the XDS socket applies ISTIO_GPRC_MAXRECVMSGSIZE to Envoy's requests
// and ISTIO_GPRC_MAXSTREAMS per connection, as Istio's agent configures its downstream gRPC
// server (pilot/pkg/grpc ServerOptions: MaxRecvMsgSize, MaxConcurrentStreams).
func TestDownstreamLimits(t *testing.T) {
	i := newIstiod(t)
	i.caches[fastpath.ClusterType].SetResources(clusters(1, 64, "v1"))
	_, sock := testProxy(t, i, func(c *Config) {
		c.Downstream = DownstreamLimits{MaxRecvMsgBytes: 4 << 10, MaxConcurrentStreams: 1}
	})
	ctx := testCtx(t)
	ads := adsClient(t, sock)

	big, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Send(&discovery.DiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType,
		ResourceNames: []string{strings.Repeat("n", 8<<10)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := big.Recv(); grpcstatus.Code(err) != codes.ResourceExhausted {
		t.Fatalf("8 KiB request against a 4 KiB limit: %v, want ResourceExhausted", err)
	}

	// One stream at a time on the connection: a second one waits for the first to end.
	first, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Send(&discovery.DiscoveryRequest{Node: &core.Node{Id: testNode.Id}, TypeUrl: fastpath.ClusterType}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	second, err := ads.StreamAggregatedResources(short)
	if err == nil {
		err = second.Send(&discovery.DiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType})
		if err == nil {
			_, err = second.Recv()
		}
	}
	if grpcstatus.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("second concurrent stream with MaxConcurrentStreams=1: %v, want it held until its deadline", err)
	}
}
