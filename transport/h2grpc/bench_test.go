package h2grpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
)

// The benchmarks run the xDS proxy's shape: a downstream grpc-go client (Envoy's side) on a
// Unix socket -> the middle under test -> a grpc-go echo server over TLS (Istiod's side), and
// back. The ends are the same grpc-go code in both variants; only the middle differs:
//
//   - h2grpc: this package's Server and Client, the response cut through in 32 KiB pieces
//     (RecvMsgHeader/Read -> BeginMsg/Write), the request forwarded whole;
//   - grpcgo: grpc-go's server and client conn with a codec that passes received buffers on
//     without copying (as lab/framecodec does for the tests), whole messages.
//
// cpu-ns/op is the whole process's CPU (getrusage), ends included; the ratio of the two
// variants in the same run is the figure to read, not the absolute times.

// bufCodec passes *mem.BufferSlice through: Unmarshal keeps a reference on what gRPC
// received, Marshal hands out a reference (gRPC frees it after writing).
type bufCodec struct{}

func (bufCodec) Marshal(v any) (mem.BufferSlice, error) {
	b := *v.(*mem.BufferSlice)
	b.Ref()
	return b, nil
}

func (bufCodec) Unmarshal(data mem.BufferSlice, v any) error {
	data.Ref()
	*v.(*mem.BufferSlice) = data
	return nil
}

func (bufCodec) Name() string { return "buf" }

// benchEcho is a grpc-go TLS server sending back every message.
func benchEcho(b testing.TB) (addr string, clientTLS *tls.Config) {
	return benchUpstream(b, func(m mem.BufferSlice) mem.BufferSlice {
		m.Ref()
		return m
	})
}

// benchPush is a grpc-go TLS server answering every request with a push of the size the
// request's first 4 bytes say (big-endian), as Istiod answers a small DiscoveryRequest.
func benchPush(b *testing.B) (addr string, clientTLS *tls.Config) {
	pushes := map[int]mem.BufferSlice{}
	var mu sync.Mutex
	return benchUpstream(b, func(m mem.BufferSlice) mem.BufferSlice {
		req := m.Materialize()
		size := int(req[0])<<24 | int(req[1])<<16 | int(req[2])<<8 | int(req[3])
		mu.Lock()
		defer mu.Unlock()
		p, ok := pushes[size]
		if !ok {
			p = mem.BufferSlice{mem.SliceBuffer(pattern(size, 9))}
			pushes[size] = p
		}
		return p
	})
}

// benchUpstream is a grpc-go TLS server answering every message with reply(message); the
// slice reply returns is sent and not freed (take a reference to send the request back).
func benchUpstream(b testing.TB, reply func(mem.BufferSlice) mem.BufferSlice) (addr string, clientTLS *tls.Config) {
	cert, pool := selfSigned(b)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})),
		grpc.ForceServerCodecV2(bufCodec{}),
		grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			for {
				var m mem.BufferSlice
				if err := ss.RecvMsg(&m); err != nil {
					return nil
				}
				r := reply(m)
				err := ss.SendMsg(&r)
				m.Free()
				if err != nil {
					return err
				}
			}
		}),
	)
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
	return l.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "localhost"}
}

// h2grpcMiddle serves on a Unix socket and forwards every stream to upstream.
func h2grpcMiddle(b testing.TB, upstream string, tc *tls.Config) string {
	c, err := NewClient(ClientConfig{Address: upstream, TLS: tc, MaxRecvMsgBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	forward := func(ss *ServerStream) error {
		us, err := c.Open(ss.Context(), testMethod)
		if err != nil {
			return err
		}
		defer us.Close()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // requests, whole
			defer wg.Done()
			for {
				m, err := ss.RecvMsg()
				if err != nil {
					us.CloseSend()
					return
				}
				err = us.SendMsg(m)
				m.Free()
				if err != nil {
					return
				}
			}
		}()
		defer wg.Wait()
		buf := make([]byte, benchPiece)
		for { // responses, cut through
			n, err := us.RecvMsgHeader()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := ss.BeginMsg(n); err != nil {
				return err
			}
			for {
				m, rerr := us.Read(buf)
				if m > 0 {
					if err := ss.Write(buf[:m]); err != nil {
						return err
					}
				}
				if rerr == io.EOF {
					break
				}
				if rerr != nil {
					return rerr
				}
			}
		}
	}
	_, path := startServer(b, ServerConfig{MaxRecvMsgBytes: 64 << 20}, map[string]Handler{testMethod: forward})
	b.Cleanup(func() { c.Close() }) // runs before the server's Stop (cleanups are LIFO): streams end Unavailable
	return path
}

// grpcgoMiddle is the same with grpc-go on both sides, whole messages.
func grpcgoMiddle(b *testing.B, upstream string, tc *tls.Config) string {
	cc, err := grpc.NewClient("passthrough:///"+upstream,
		grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(bufCodec{}), grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ForceServerCodecV2(bufCodec{}),
		grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			us, err := cc.NewStream(ss.Context(), bidi, testMethod)
			if err != nil {
				return err
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var m mem.BufferSlice
					if err := ss.RecvMsg(&m); err != nil {
						us.CloseSend()
						return
					}
					err := us.SendMsg(&m)
					m.Free()
					if err != nil {
						return
					}
				}
			}()
			defer wg.Wait()
			for {
				var m mem.BufferSlice
				if err := us.RecvMsg(&m); err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
				err := ss.SendMsg(&m)
				m.Free()
				if err != nil {
					return err
				}
			}
		}),
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
		cc.Close()
	})
	return path
}

// benchPiece is the middle's read buffer for the cut-through direction: a bigger read hands
// the body on in fewer pieces (the client grants stream window back once half the
// window is read, core_recvstream.go take, whatever the read size).
var benchPiece = 256 << 10

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkProxyRoundTrip(b *testing.B) { benchProxy(b, false) }

// BenchmarkProxyPush is the xDS shape: a 4-byte request, a push of the size back.
func BenchmarkProxyPush(b *testing.B) { benchProxy(b, true) }

func benchProxy(b *testing.B, push bool) {
	for _, size := range []int{1 << 10, 1 << 20, 4 << 20} {
		for _, impl := range []string{"h2grpc", "grpcgo"} {
			b.Run(fmt.Sprintf("%s/%dKB", impl, size>>10), func(b *testing.B) {
				var upstream string
				var tc *tls.Config
				if push {
					upstream, tc = benchPush(b)
				} else {
					upstream, tc = benchEcho(b)
				}
				var path string
				if impl == "h2grpc" {
					path = h2grpcMiddle(b, upstream, tc)
				} else {
					path = grpcgoMiddle(b, upstream, tc)
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
				if push {
					msg = mem.BufferSlice{mem.SliceBuffer([]byte{byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)})}
				}
				runRoundTrips(b, size, func() {
					if err := cs.SendMsg(&msg); err != nil {
						b.Fatal(err)
					}
					var got mem.BufferSlice
					if err := cs.RecvMsg(&got); err != nil {
						b.Fatal(err)
					}
					if got.Len() != size {
						b.Fatalf("reply of %d bytes, want %d", got.Len(), size)
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
