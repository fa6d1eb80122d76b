package h2grpc

import (
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
)

// BenchmarkClientEcho measures the client alone: one stream to a grpc-go echo server (plain
// TCP) sends a message and reads the echo back, with this package's Client and, as the
// same-run reference, with grpc-go's client. Compare the two per size (ns/op, cpu-ns/op and
// allocs/op), not absolute figures: the machine is shared.
func BenchmarkClientEcho(b *testing.B) {
	p := startGRPCPeer(b, false)
	for _, size := range []int{1 << 10, 1 << 20, 4 << 20} {
		msg := pattern(size, 3)
		b.Run(fmt.Sprintf("h2grpc/%dKB", size>>10), func(b *testing.B) {
			c := newTestClient(b, p, nil)
			s, err := c.Open(testCtx(b), testMethod)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			buf := make([]byte, 32<<10)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := s.SendMsg(mem.BufferSlice{mem.SliceBuffer(msg)}); err != nil {
					b.Fatal(err)
				}
				n, err := s.RecvMsgHeader()
				if err != nil || n != size {
					b.Fatalf("RecvMsgHeader: %d %v", n, err)
				}
				for {
					if _, err := s.Read(buf); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("grpcgo/%dKB", size>>10), func(b *testing.B) {
			cc, err := grpc.NewClient("passthrough:///"+p.addr,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			cs, err := cc.NewStream(testCtx(b), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, testMethod)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.CloseSend()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := cs.SendMsg(&msg); err != nil {
					b.Fatal(err)
				}
				var got []byte
				if err := cs.RecvMsg(&got); err != nil || len(got) != size {
					b.Fatalf("RecvMsg: %d %v", len(got), err)
				}
			}
		})
	}
}
