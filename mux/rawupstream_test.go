package mux

import (
	"fmt"
	"net"
	"strings"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/lab/framecodec"
)

// rawUpstream is a plaintext gRPC ADS server whose streams run a test-supplied function over
// raw frames, for behaviours go-control-plane does not have (pushing without waiting for ACKs).
type rawUpstream struct {
	addr string
}

func newRawUpstream(t testing.TB, handle func(grpc.ServerStream) error) *rawUpstream {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(framecodec.Codec{}), grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20))
	h := func(_ any, ss grpc.ServerStream) error { return handle(ss) }
	srv.RegisterService(&grpc.ServiceDesc{ServiceName: adsService, HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{
		{StreamName: "StreamAggregatedResources", ServerStreams: true, ClientStreams: true, Handler: h},
		{StreamName: "DeltaAggregatedResources", ServerStreams: true, ClientStreams: true, Handler: h},
	}}, nil)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return &rawUpstream{addr: l.Addr().String()}
}

// encodeResponse builds a DiscoveryResponse of n resources totalling about size bytes.
func encodeResponse(t testing.TB, typeURL, version string, n, size int) fastpath.Frame {
	r := &discovery.DiscoveryResponse{VersionInfo: version, TypeUrl: typeURL, Nonce: "n" + version}
	body := []byte(strings.Repeat("r", max(size/n-8, 1)))
	for range n {
		r.Resources = append(r.Resources, &anypb.Any{TypeUrl: typeURL, Value: body})
	}
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return fastpath.FrameOf(b)
}

// encodeDeltaResponse builds a DeltaDiscoveryResponse of n resources totalling about size bytes.
func encodeDeltaResponse(t testing.TB, typeURL, version string, n, size int) fastpath.Frame {
	r := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: version, TypeUrl: typeURL, Nonce: "n" + version}
	body := []byte(strings.Repeat("r", max(size/n-24, 1)))
	for k := range n {
		r.Resources = append(r.Resources, &discovery.Resource{Name: fmt.Sprint("res-", k), Version: version,
			Resource: &anypb.Any{TypeUrl: typeURL, Value: body}})
	}
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return fastpath.FrameOf(b)
}
