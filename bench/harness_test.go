package bench

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/lab/framecodec"
	"github.com/wingman-mesh/wingman/lab/refagent"
	"github.com/wingman-mesh/wingman/mux"
)

const maxMsg = 64 << 20

var adsDesc = grpc.ServiceDesc{ServiceName: "envoy.service.discovery.v3.AggregatedDiscoveryService", HandlerType: (*any)(nil)}

// pingPong is a plaintext upstream that answers every request with the same pre-encoded
// response: one benchmark iteration is one push of that response through the proxy.
func pingPong(tb testing.TB, resp []byte) string { return servePingPong(tb, resp) }

// servePingPong is pingPong with extra server options (TLS credentials).
func servePingPong(tb testing.TB, resp []byte, opts ...grpc.ServerOption) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.ForceServerCodecV2(framecodec.Codec{}), grpc.MaxRecvMsgSize(maxMsg),
		grpc.MaxSendMsgSize(maxMsg), grpc.InitialWindowSize(1 << 20), grpc.InitialConnWindowSize(4 << 20)}, opts...)...)
	desc := adsDesc
	desc.Streams = []grpc.StreamDesc{{StreamName: "StreamAggregatedResources", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			out := fastpath.FrameOf(resp)
			for {
				var f fastpath.Frame
				if err := ss.RecvMsg(&f); err != nil {
					return nil
				}
				f.Free()
				if err := ss.SendMsg(&out); err != nil {
					return nil
				}
			}
		}}}
	srv.RegisterService(&desc, nil)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	tb.Cleanup(func() { srv.Stop(); <-done })
	return l.Addr().String()
}

// response encodes a DiscoveryResponse of n resources totalling about size bytes.
func response(tb testing.TB, size, n int) []byte {
	r := &discovery.DiscoveryResponse{VersionInfo: "v1", TypeUrl: fastpath.ClusterType, Nonce: "nonce-1"}
	body := []byte(strings.Repeat("c", max(size/n-8, 1)))
	for range n {
		r.Resources = append(r.Resources, &anypb.Any{TypeUrl: fastpath.ClusterType, Value: body})
	}
	b, err := proto.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// startWingman serves Wingman's proxy on a Unix socket in front of upstream.
func startWingman(tb testing.TB, upstream string) string {
	sock := filepath.Join(tb.TempDir(), "XDS")
	p, err := mux.New(mux.Config{SocketPath: sock, Upstream: mux.UpstreamConfig{Address: upstream, Plaintext: true}})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := mux.Listen(sock)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Serve(ctx, l) }()
	tb.Cleanup(func() { cancel(); <-errc })
	return sock
}

// startReference serves the reference proxy (lab/refagent: decode and re-encode, a new
// upstream connection per stream, as Istio's agent) on a Unix socket in front of upstream.
func startReference(tb testing.TB, upstream string) string {
	sock := filepath.Join(tb.TempDir(), "XDS")
	l, err := mux.Listen(sock)
	if err != nil {
		tb.Fatal(err)
	}
	ref, err := refagent.New(refagent.Config{Upstream: upstream, MaxMessageBytes: maxMsg})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ref.Serve(ctx, l) }()
	tb.Cleanup(func() { cancel(); <-errc })
	return sock
}

// client is a raw-frame ADS client, so that the client's own cost is the same for both proxies.
type client struct {
	stream grpc.ClientStream
	req    fastpath.Frame
	resp   fastpath.Frame
}

func newClient(tb testing.TB, sock string) *client {
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() { cancel(); cc.Close() })
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
		"/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
		grpc.ForceCodecV2(framecodec.Codec{}), grpc.MaxCallRecvMsgSize(maxMsg))
	if err != nil {
		tb.Fatal(err)
	}
	node, _ := proto.Marshal(&core.Node{Id: "sidecar~10.0.0.1~bench.ns~ns.svc.cluster.local"})
	c := &client{stream: st}
	first := fastpath.AppendRequest(nil, fastpath.ClusterType, "", "", node, nil, nil)
	c.req = fastpath.FrameOf(fastpath.AppendRequest(nil, fastpath.ClusterType, "v1", "nonce-1", nil, nil, nil))
	f := fastpath.FrameOf(first)
	if err := st.SendMsg(&f); err != nil {
		tb.Fatal(err)
	}
	if err := st.RecvMsg(&c.resp); err != nil {
		tb.Fatal(err)
	}
	c.resp.Free()
	return c
}

// push sends an ACK, which the upstream answers with the next push, and reads that push.
func (c *client) push(tb testing.TB) int {
	if err := c.stream.SendMsg(&c.req); err != nil {
		tb.Fatal(err)
	}
	if err := c.stream.RecvMsg(&c.resp); err != nil {
		tb.Fatal(err)
	}
	n := c.resp.Len()
	c.resp.Free()
	return n
}

var sizes = []struct {
	name      string
	size, res int
}{
	{"size=1KB", 1 << 10, 1},
	{"size=100KB", 100 << 10, 100},
	{"size=1MB", 1 << 20, 1000},
	{"size=4MB", 4 << 20, 4000},
	{"size=10MB", 10 << 20, 10000},
}

func benchForward(b *testing.B, start func(testing.TB, string) string) {
	for _, s := range sizes {
		b.Run(s.name, func(b *testing.B) {
			resp := response(b, s.size, s.res)
			c := newClient(b, start(b, pingPong(b, resp)))
			b.SetBytes(int64(len(resp)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if c.push(b) != len(resp) {
					b.Fatal("short response")
				}
			}
		})
	}
}

// BenchmarkForward pushes one response per iteration through Wingman's proxy: Unix socket
// downstream, loopback TCP upstream, raw-frame client and upstream.
func BenchmarkForward(b *testing.B) { benchForward(b, startWingman) }

// BenchmarkForwardReference is the same through the reference proxy (decode, re-encode, one
// upstream connection per stream), so every run yields the ratio.
func BenchmarkForwardReference(b *testing.B) { benchForward(b, startReference) }

var _ = fmt.Sprint
