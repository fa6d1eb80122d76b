// Package h2grpc carries gRPC streams over HTTP/2 endpoints of its own, built on
// golang.org/x/net/http2's Framer and hpack, with messages that can be read and written in
// pieces. It exists for the xDS proxy's cut-through forwarding: grpc-go only hands over whole
// messages, so a 10 MB push would be fully received before its first byte went on; here a
// message's body is read from the transport into the caller's buffers (ClientStream.Read) and
// written out piece by piece (ServerStream.BeginMsg/Write), each piece returning once it is
// written, so a slow reader bounds the memory held instead of growing it. The SDS server uses the
// same Server; the CA client and the gRPC health probes make unary calls (Client.Unary,
// Client.HealthCheck), so the agent links no grpc-go client or server at all.
//
// Client is one HTTP/2 connection (TLS with ALPN h2, plaintext with prior knowledge, or a
// caller's Dial) shared by every stream, dialled lazily and again after it is lost or after a
// GOAWAY. Server serves HTTP/2 with prior knowledge (h2c), for Envoy on a Unix socket. Both
// sides' connections embed one connection core, conn (core_*.go, keepalive.go), so that a fix
// lands once: one reader goroutine per connection reading through a 4 KiB buffer of its own, and
// through a 64 KiB one borrowed only while a burst arrives (connbuf.go); one receive path
// (core_recv.go) that copies DATA once into pooled buffers queued on the stream's recvStream,
// the same type on both sides, each side only finding the stream a frame is for; every frame
// written through one buffered writer under a mutex, its 64 KiB buffer too borrowed only while
// frames wait (the last writer out flushes: frames written together cost one system call);
// window updates once a quarter of the connection's window is owed, as DATA arrives, and half of
// a stream's, as its receiver reads (grpc-go's rule of where, on both sides: core_recv.go says
// why);
// SETTINGS/PING/GOAWAY/RST_STREAM handled, flow control enforced on what is received, protocol
// errors close the connection with GOAWAY and stream errors reset only the stream. Only what the proxy needs of gRPC is spoken: the 5-byte length
// prefix (uncompressed), the content-type, grpc-status/grpc-message trailers (percent-encoded as
// the gRPC HTTP/2 protocol document says), grpc-timeout (sent from the context's deadline, read
// on the server), and grpc-go's HTTP-to-gRPC status mapping. Errors from the peer or the transport are grpc status errors (status.Code is
// meaningful); transport failures are codes.Unavailable. Every behaviour is tested against real
// grpc-go peers (client_test.go, server_test.go) and against raw HTTP/2 frames
// (client_h2_test.go, server_h2_test.go); FuzzClientFrames and FuzzServerFrames feed arbitrary
// frames to a real endpoint.
//
// Why not net/http's HTTP/2 (the package's first version): its server writes every DATA frame
// from a goroutine of its own with a system call each and allocates per frame, its client reads
// through 4 KiB and returns a WINDOW_UPDATE per 4 KiB read. In the proxy that cost 1.6-2.3x the
// CPU floor per forwarded MB and 1,573 allocations per 4 MB push (process-wide); on these
// endpoints the proxy's own count is about 25 per push whatever its size
// (bench/budget_test.go), at 1.2-1.7x the floor (bench/README.md).
package h2grpc
