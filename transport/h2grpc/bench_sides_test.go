package h2grpc

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
)

// One side at a time, to tell where the proxy benchmark's difference comes from:
// BenchmarkClientTLS is a client under test against grpc-go's echo over TLS;
// BenchmarkServerUnix a grpc-go client against the server under test on a Unix socket.

var sideSizes = []int{1 << 10, 1 << 20, 4 << 20}

func BenchmarkClientTLS(b *testing.B) {
	for _, size := range sideSizes {
		for _, impl := range []string{"h2grpc", "grpcgo"} {
			b.Run(fmt.Sprintf("%s/%dKB", impl, size>>10), func(b *testing.B) {
				upstream, tc := benchEcho(b)
				msg := mem.BufferSlice{mem.SliceBuffer(pattern(size, 0))}
				var roundTrip func()
				if impl == "h2grpc" {
					c, err := NewClient(ClientConfig{Address: upstream, TLS: tc, MaxRecvMsgBytes: 64 << 20})
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					s, err := c.Open(context.Background(), testMethod)
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					buf := make([]byte, benchPiece)
					roundTrip = func() {
						if err := s.SendMsg(msg); err != nil {
							b.Fatal(err)
						}
						n, err := s.RecvMsgHeader()
						if err != nil || n != size {
							b.Fatal(n, err)
						}
						for {
							_, err := s.Read(buf)
							if err == io.EOF {
								break
							}
							if err != nil {
								b.Fatal(err)
							}
						}
					}
				} else {
					cc, err := grpc.NewClient("passthrough:///"+upstream,
						grpc.WithTransportCredentials(credentials.NewTLS(tc)),
						grpc.WithDefaultCallOptions(grpc.ForceCodecV2(bufCodec{}), grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
					if err != nil {
						b.Fatal(err)
					}
					defer cc.Close()
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					cs, err := cc.NewStream(ctx, bidi, testMethod)
					if err != nil {
						b.Fatal(err)
					}
					roundTrip = func() {
						if err := cs.SendMsg(&msg); err != nil {
							b.Fatal(err)
						}
						var got mem.BufferSlice
						if err := cs.RecvMsg(&got); err != nil {
							b.Fatal(err)
						}
						got.Free()
					}
				}
				runRoundTrips(b, size, roundTrip)
			})
		}
	}
}

func BenchmarkServerUnix(b *testing.B) {
	for _, size := range sideSizes {
		for _, impl := range []string{"h2grpc", "grpcgo"} {
			b.Run(fmt.Sprintf("%s/%dKB", impl, size>>10), func(b *testing.B) {
				var path string
				if impl == "h2grpc" {
					_, path = startServer(b, ServerConfig{MaxRecvMsgBytes: 64 << 20}, map[string]Handler{testMethod: echoHandler})
				} else {
					path = grpcgoEchoUnix(b)
				}
				cc, err := grpc.NewClient("unix://"+path,
					grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithDefaultCallOptions(grpc.ForceCodecV2(bufCodec{}), grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
				if err != nil {
					b.Fatal(err)
				}
				defer cc.Close()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cs, err := cc.NewStream(ctx, bidi, testMethod)
				if err != nil {
					b.Fatal(err)
				}
				msg := mem.BufferSlice{mem.SliceBuffer(pattern(size, 0))}
				runRoundTrips(b, size, func() {
					if err := cs.SendMsg(&msg); err != nil {
						b.Fatal(err)
					}
					var got mem.BufferSlice
					if err := cs.RecvMsg(&got); err != nil {
						b.Fatal(err)
					}
					got.Free()
				})
				cs.CloseSend()
				var m mem.BufferSlice
				cs.RecvMsg(&m)
			})
		}
	}
}

func runRoundTrips(b *testing.B, size int, roundTrip func()) {
	roundTrip()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuNow()
	for range b.N {
		roundTrip()
	}
	b.ReportMetric(float64(cpuNow()-cpu0)/float64(b.N), "cpu-ns/op")
	b.StopTimer()
}

func grpcgoEchoUnix(b *testing.B) string {
	return grpcgoServeUnix(b, func(_ any, ss grpc.ServerStream) error {
		for {
			var m mem.BufferSlice
			if err := ss.RecvMsg(&m); err != nil {
				return nil
			}
			err := ss.SendMsg(&m)
			m.Free()
			if err != nil {
				return err
			}
		}
	})
}

// grpcgoServeUnix serves h (every method) with grpc-go on a fresh Unix socket.
func grpcgoServeUnix(b *testing.B, h grpc.StreamHandler) string {
	srv := grpc.NewServer(
		grpc.ForceServerCodecV2(bufCodec{}),
		grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20),
		grpc.UnknownServiceHandler(h),
	)
	path := filepath.Join(b.TempDir(), "g.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		srv.Serve(l)
	}()
	b.Cleanup(func() {
		srv.Stop()
		wg.Wait()
	})
	return path
}

// BenchmarkServerPush is the proxy's hot direction alone: a grpc-go client (Envoy's side)
// sends a 4-byte request, the server under test answers with a prepared message of that size.
func BenchmarkServerPush(b *testing.B) {
	for _, size := range sideSizes {
		push := mem.BufferSlice{mem.SliceBuffer(pattern(size, 2))}
		for _, impl := range []string{"h2grpc", "grpcgo"} {
			b.Run(fmt.Sprintf("%s/%dKB", impl, size>>10), func(b *testing.B) {
				var path string
				if impl == "h2grpc" {
					_, path = startServer(b, ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
						for {
							m, err := ss.RecvMsg()
							if err != nil {
								return nil
							}
							m.Free()
							if err := ss.SendMsg(push); err != nil {
								return err
							}
						}
					}})
				} else {
					path = grpcgoServeUnix(b, func(_ any, ss grpc.ServerStream) error {
						for {
							var m mem.BufferSlice
							if err := ss.RecvMsg(&m); err != nil {
								return nil
							}
							m.Free()
							p := push
							p.Ref()
							if err := ss.SendMsg(&p); err != nil {
								return err
							}
						}
					})
				}
				cc, err := grpc.NewClient("unix://"+path,
					grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithDefaultCallOptions(grpc.ForceCodecV2(bufCodec{}), grpc.MaxCallRecvMsgSize(64<<20)))
				if err != nil {
					b.Fatal(err)
				}
				defer cc.Close()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cs, err := cc.NewStream(ctx, bidi, testMethod)
				if err != nil {
					b.Fatal(err)
				}
				req := mem.BufferSlice{mem.SliceBuffer([]byte{0, 0, 0, 1})}
				runRoundTrips(b, size, func() {
					if err := cs.SendMsg(&req); err != nil {
						b.Fatal(err)
					}
					var got mem.BufferSlice
					if err := cs.RecvMsg(&got); err != nil {
						b.Fatal(err)
					}
					if got.Len() != size {
						b.Fatalf("push of %d bytes, want %d", got.Len(), size)
					}
					got.Free()
				})
				cs.CloseSend()
				var m mem.BufferSlice
				cs.RecvMsg(&m)
			})
		}
	}
}
