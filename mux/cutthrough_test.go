package mux

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/transport/h2grpc"
)

// pieceUpstream is an Istiod stand-in that can send a response in pieces, stop in the middle
// of one, or send a malformed one: go-control-plane and grpc-go only send whole messages. It
// speaks plaintext gRPC (transport/h2grpc's server, tested against grpc-go's client there).
type pieceUpstream struct {
	addr string
}

func newPieceUpstream(t testing.TB, handle func(ss *h2grpc.ServerStream) error) *pieceUpstream {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := h2grpc.NewServer(t.Context(), h2grpc.ServerConfig{MaxRecvMsgBytes: 64 << 20}, map[string]h2grpc.Handler{
		sotwMethod: handle, deltaMethod: handle,
	})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return &pieceUpstream{addr: l.Addr().String()}
}

// rawDownstream is a client on the proxy's socket that sees a response's bytes as they arrive
// (transport/h2grpc's client), where a gRPC client only returns whole messages.
func rawDownstream(t testing.TB, ctx context.Context, sock string, delta bool) *h2grpc.ClientStream {
	c, err := h2grpc.NewClient(h2grpc.ClientConfig{Address: "localhost:80", MaxRecvMsgBytes: 64 << 20,
		Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	method := sotwMethod
	if delta {
		method = deltaMethod
	}
	s, err := c.Open(ctx, method)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func plaintextProxy(t testing.TB, addr string) (*Proxy, string) {
	return testProxy(t, nil, func(c *Config) {
		c.Upstream = UpstreamConfig{Address: addr, Plaintext: true}
	})
}

func sendFrame(t testing.TB, s interface{ SendMsg(mem.BufferSlice) error }, b []byte) {
	t.Helper()
	if err := s.SendMsg(mem.BufferSlice{mem.SliceBuffer(b)}); err != nil {
		t.Fatal(err)
	}
}

// TestCutThroughForwardsWhileArriving: the first half of a 4 MB response reaches the client
// while Istiod still holds the second half; then the rest arrives, byte-identical, and the
// client's ACK carries the nonce that came last on the wire.
func TestCutThroughForwardsWhileArriving(t *testing.T) {
	ctx := testCtx(t)
	msg := encodeResponse(t, fastpath.ClusterType, "1", 100, 4<<20)
	wire := msg.Data.Materialize()
	release := make(chan struct{})
	acked := make(chan string, 1)
	up := newPieceUpstream(t, func(ss *h2grpc.ServerStream) error {
		if _, err := ss.RecvMsg(); err != nil {
			return err
		}
		if err := ss.BeginMsg(len(wire)); err != nil {
			return err
		}
		if err := ss.Write(wire[:len(wire)/2]); err != nil {
			return err
		}
		select {
		case <-release:
		case <-ss.Context().Done():
			return nil
		}
		if err := ss.Write(wire[len(wire)/2:]); err != nil {
			return err
		}
		ack, err := ss.RecvMsg()
		if err != nil {
			return err
		}
		var p fastpath.Peeker
		var r fastpath.Request
		if err := p.PeekRequest(ack, &r); err != nil {
			return err
		}
		acked <- r.Nonce
		<-ss.Context().Done()
		return nil
	})
	p, sock := plaintextProxy(t, up.addr)
	down := rawDownstream(t, ctx, sock, false)
	sendFrame(t, down, fastpath.AppendRequest(nil, fastpath.ClusterType, "", "", mustNode(t), nil, nil))
	size, err := down.RecvMsgHeader()
	if err != nil {
		t.Fatal(err)
	}
	if size != len(wire) {
		t.Fatalf("message of %d bytes announced, want %d", size, len(wire))
	}
	got := make([]byte, size)
	if _, err := io.ReadFull(down, got[:len(wire)/2]); err != nil {
		t.Fatalf("first half while Istiod holds the rest: %v", err)
	}
	close(release)
	if _, err := io.ReadFull(down, got[len(wire)/2:]); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(wire) {
		t.Fatal("forwarded bytes differ from Istiod's")
	}
	if st := p.Stats(); st.PeakResponses > 1<<20 {
		t.Errorf("held up to %d bytes of a 4 MB response, want <= 1 MiB", st.PeakResponses)
	}
	sendFrame(t, down, fastpath.AppendRequest(nil, fastpath.ClusterType, "1", "n1", nil, nil, nil))
	select {
	case n := <-acked:
		if n != "n1" {
			t.Fatalf("Istiod saw ACK nonce %q, want n1", n)
		}
	case <-ctx.Done():
		t.Fatal("no ACK reached Istiod")
	}
}

// TestCutThroughUpstreamLostMidMessage: Istiod's stream breaks in the middle of a response of
// which the client already holds a part: the client's stream ends with Unavailable (the message
// can be neither completed nor taken back; Istio's agent closes the client's stream on any
// upstream loss), the proxy stays up, and the client's next stream is served.
func TestCutThroughUpstreamLostMidMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(ss *h2grpc.ServerStream, wire []byte) error
		code codes.Code
	}{
		{"reset", func(ss *h2grpc.ServerStream, wire []byte) error {
			return status.Error(codes.Unavailable, "istiod going away")
		}, codes.Unknown},
		{"malformed", func(ss *h2grpc.ServerStream, wire []byte) error {
			// The rest of the message: a field with wire type 7, which no protobuf has.
			rest := make([]byte, len(wire)-len(wire)/2)
			for k := range rest {
				rest[k] = 0x0f
			}
			if err := ss.Write(rest); err != nil {
				return err
			}
			<-ss.Context().Done()
			return nil
		}, codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			msg := encodeResponse(t, fastpath.ClusterType, "1", 100, 2<<20)
			wire := msg.Data.Materialize()
			first := make(chan struct{}, 1)
			up := newPieceUpstream(t, func(ss *h2grpc.ServerStream) error {
				if _, err := ss.RecvMsg(); err != nil {
					return err
				}
				select {
				case first <- struct{}{}:
				default: // later streams: a whole response, then wait
					if err := ss.SendMsg(mem.BufferSlice{mem.SliceBuffer(wire)}); err != nil {
						return err
					}
					<-ss.Context().Done()
					return nil
				}
				if err := ss.BeginMsg(len(wire)); err != nil {
					return err
				}
				if err := ss.Write(wire[:len(wire)/2]); err != nil {
					return err
				}
				return tc.end(ss, wire)
			})
			_, sock := plaintextProxy(t, up.addr)
			ads := adsClient(t, sock)
			stream := subscribeClusters(t, ctx, ads)
			_, err := stream.Recv()
			// The proxy ends the stream with Unavailable after a loss, but grpc-go reports a
			// message cut short as Internal whatever the trailers say: either will do.
			if c := status.Code(err); c != tc.code && !(tc.code == codes.Unknown && (c == codes.Unavailable || c == codes.Internal)) {
				t.Fatalf("client's stream ended with %v, want %v", err, tc.code)
			}
			stream = subscribeClusters(t, ctx, ads)
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("the next stream: %v", err)
			}
		})
	}
}

// TestCutThroughMemory: a 10 MB push, SotW and Delta, through go-control-plane and a real gRPC
// client, never has more than a few pieces of it held by the proxy.
func TestCutThroughMemory(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			i := newIstiod(t)
			p, sock := testProxy(t, i, nil)
			ctx := testCtx(t)
			want := clusters(1000, 10<<20, "big")
			i.caches[fastpath.ClusterType].SetResources(want)
			ads := adsClient(t, sock)
			n := 0
			if delta {
				stream, err := ads.DeltaAggregatedResources(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer stream.CloseSend()
				if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: testNode, TypeUrl: fastpath.ClusterType}); err != nil {
					t.Fatal(err)
				}
				r, err := stream.Recv()
				if err != nil {
					t.Fatal(err)
				}
				n = len(r.Resources)
			} else {
				r, err := subscribeClusters(t, ctx, ads).Recv()
				if err != nil {
					t.Fatal(err)
				}
				checkSotW(t, r, want)
				n = len(r.Resources)
			}
			if n != len(want) {
				t.Fatalf("%d resources, want %d", n, len(want))
			}
			// Pieces are 32 KiB; a client that keeps up has a handful in flight.
			if st := p.Stats(); st.PeakResponses > 1<<20 {
				t.Fatalf("held up to %d bytes of a 10 MB push, want <= 1 MiB", st.PeakResponses)
			}
		})
	}
}

func mustNode(t testing.TB) []byte {
	b, err := proto.Marshal(testNode)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
