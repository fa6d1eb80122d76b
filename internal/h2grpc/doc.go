// Package h2grpc carries gRPC streams over the HTTP/2 implementation of Go's standard library
// (net/http), with messages that can be read and written in pieces. It exists for the xDS
// proxy's cut-through forwarding: grpc-go only hands over whole messages, so a 10 MB push would
// be fully received before its first byte went on; here a message's body is read straight from
// the transport into the caller's buffers (ClientStream.Read) and written out piece by piece
// (ServerStream.BeginMsg/Write), each piece blocking until HTTP/2 flow control lets it go, so a
// slow reader bounds the memory held instead of growing it.
//
// Client is one HTTP/2 connection (TLS with ALPN h2, or plaintext with prior knowledge) shared
// by every stream and redialled on the next Open after it is lost. Server serves HTTP/2 with
// prior knowledge (h2c), for Envoy on a Unix socket. Only what the proxy needs of gRPC is spoken:
// the 5-byte length prefix (uncompressed), the content-type, grpc-status/grpc-message trailers
// (percent-encoded as the gRPC HTTP/2 protocol document says), grpc-timeout on the server, and
// the HTTP-to-gRPC status mapping of grpc-go. Errors that come from the peer or the transport are
// grpc status errors (status.Code is meaningful); transport failures are codes.Unavailable.
package h2grpc

// Performance (bench_test.go, bench_sides_test.go; same-run ratios on 2 shared cores, medians
// of 6 with benchstat, grpc-go = base; cpu-ns/op is the whole process's CPU, peers included):
//
//	go test -run '^$' -bench 'Proxy|ClientTLS|Server' -benchtime 30x -count 6 ./internal/h2grpc/
//
//	                       1 KB     1 MB          4 MB
//	ProxyPush  (xDS shape)  ~       +53% (±27%)   +11% (±11%)
//	ProxyRoundTrip (echo)   ~ (ns)  +40%          +24%
//	ClientTLS  alone        ~       ~             +31%
//	ServerUnix alone (echo) +92%    +74%          +70%
//	ServerPush alone        +37%    +60% (±24%)   +31% (±5%)
//
// The client side costs about what grpc-go's does; net/http's HTTP/2 server is the
// expensive half: it writes every 16 KiB DATA frame with its own write system call and a
// goroutine (writeFrameAsync), and allocates per frame, where grpc-go batches frames into
// one write. The receiving peer pays too: in ServerPush, grpc-go's client reader (Envoy's
// place) spends 44% of the process's CPU, one read per frame. The server's connections are
// therefore write-behind (writebehind.go): frames gathered while a write(2) runs go out in
// the next one; A/B in one run, ServerPush CPU -23% (1 MB) and -8% (4 MB). ProxyPush and
// ServerPush above are with it, the other rows from before it. Allocations per message: ours none on the client, one BufferSlice per received
// message on the server (TestAllocsRoundTrip); the rest is net/http's, per frame.
