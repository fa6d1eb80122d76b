package h2grpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ClientConfig configures a Client. Only Address is required.
type ClientConfig struct {
	// Address is the server's host:port; it is also the :authority of every stream.
	Address string
	// TLS, when set, makes the connection TLS with ALPN "h2" (NextProtos is set to exactly
	// that on a clone). Nil: plaintext HTTP/2 with prior knowledge (Istiod's 15010).
	TLS *tls.Config
	// Header returns per-stream request metadata (bearer token read per call, ClusterID, ...).
	// Called once per Open with the stream's context; may be nil. An error fails Open: a status
	// error keeps its code, anything else is Unavailable (as grpc-go does with failing per-RPC
	// credentials).
	Header func(ctx context.Context) (http.Header, error)
	// StreamWindow and ConnWindow are the receive flow-control windows. At most StreamWindow
	// of a stream's data is buffered unread: the server is granted more once half of it
	// has been read (recvWindow). ConnWindow bounds the data in flight on the connection, granted back as
	// it arrives, so one stalled stream does not stop the others (both as grpc-go grants;
	// core_recv.go). 0 chooses 1 MiB and 4 MiB: enough to keep a TLS connection busy at local
	// round-trip times while bounding what a stalled reader holds. Valid: StreamWindow 64 KiB..2 GiB-1, ConnWindow 64 KiB..2 GiB-1 and not
	// below StreamWindow (RFC 9113 section 6.9.1 caps a window at 2^31-1).
	StreamWindow, ConnWindow int
	// KeepaliveTime: after this long without a frame received, the client pings (as net/http's
	// HTTP2Config.SendPingTimeout did before this package spoke HTTP/2 itself);
	// KeepaliveTimeout: the connection is closed when the ping is not answered within it (0
	// means 15 s, net/http's PingTimeout default). 0: no pings.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxRecvMsgBytes bounds a received message: a larger one ends the stream with
	// ResourceExhausted. 0: 4 MiB, grpc-go's default.
	MaxRecvMsgBytes int
	// Dial, when set, makes the connection's byte stream (e.g. a Unix socket) in place of a TCP
	// dial to Address, which remains the :authority.
	Dial func(ctx context.Context) (net.Conn, error)
}

const (
	defaultStreamWindow = 1 << 20
	defaultConnWindow   = 4 << 20
	minWindow           = 64 << 10
	defaultMaxRecvMsg   = 4 << 20
	userAgent           = "wingman-h2grpc"
)

// Client holds ONE HTTP/2 connection to a gRPC server, made on the first Open and made again
// by the first Open after it is lost (or after the server's GOAWAY); every stream shares it.
type Client struct {
	// immutable after NewClient
	cfg    ClientConfig
	tls    *tls.Config // nil: plaintext with prior knowledge
	scheme string

	mu      sync.Mutex    // guards the fields below
	cc      *clientConn   // current connection; nil before the first dial
	dialing chan struct{} // closed when the dial in progress ends; nil when none
	closed  bool
	conns   []*clientConn // every connection not yet waited for (GOAWAY'd ones keep streams)
}

// NewClient checks cfg; it does not dial.
func NewClient(cfg ClientConfig) (*Client, error) {
	host, _, err := net.SplitHostPort(cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("h2grpc: client address %q: %w", cfg.Address, err)
	}
	if cfg.StreamWindow == 0 {
		cfg.StreamWindow = defaultStreamWindow
	}
	if cfg.ConnWindow == 0 {
		cfg.ConnWindow = max(defaultConnWindow, cfg.StreamWindow)
	}
	if err := checkWindows(cfg.StreamWindow, cfg.ConnWindow); err != nil {
		return nil, err
	}
	if cfg.KeepaliveTime < 0 || cfg.KeepaliveTimeout < 0 {
		return nil, fmt.Errorf("h2grpc: negative keepalive time %v or timeout %v", cfg.KeepaliveTime, cfg.KeepaliveTimeout)
	}
	if cfg.MaxRecvMsgBytes < 0 || uint64(cfg.MaxRecvMsgBytes) > math.MaxUint32 {
		return nil, fmt.Errorf("h2grpc: MaxRecvMsgBytes %d out of range 0..%d", cfg.MaxRecvMsgBytes, uint64(math.MaxUint32))
	}
	if cfg.MaxRecvMsgBytes == 0 {
		cfg.MaxRecvMsgBytes = defaultMaxRecvMsg
	}
	c := &Client{cfg: cfg, scheme: "http"}
	if cfg.TLS != nil {
		c.scheme = "https"
		c.tls = cfg.TLS.Clone()
		c.tls.NextProtos = []string{"h2"}
		if c.tls.ServerName == "" {
			// As net/http's transport does: the server name is the address's host.
			c.tls.ServerName = host
		}
	}
	return c, nil
}

func checkWindows(stream, conn int) error {
	if stream < minWindow || stream > math.MaxInt32 {
		return fmt.Errorf("h2grpc: stream window %d out of range %d..%d", stream, minWindow, math.MaxInt32)
	}
	if conn < minWindow || conn > math.MaxInt32 || conn < stream {
		return fmt.Errorf("h2grpc: connection window %d out of range %d..%d or below the stream window %d", conn, minWindow, math.MaxInt32, stream)
	}
	return nil
}

var errClientClosed = status.Error(codes.Canceled, "h2grpc: client is closed")

// conn returns the live connection, dialling one (once, whatever the number of callers) when
// there is none or the last one is lost or going away.
func (c *Client) conn(ctx context.Context) (*clientConn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, errClientClosed
		}
		if c.cc != nil && c.cc.usable() {
			cc := c.cc
			c.mu.Unlock()
			return cc, nil
		}
		if wait := c.dialing; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, status.FromContextError(ctx.Err()).Err()
			}
		}
		done := make(chan struct{})
		c.dialing = done
		c.cc = nil
		// Connections that have ended are waited for (their goroutines are over or ending).
		var ended []*clientConn
		live := c.conns[:0]
		for _, old := range c.conns {
			select {
			case <-old.done:
				ended = append(ended, old)
			default:
				live = append(live, old)
			}
		}
		clear(c.conns[len(live):])
		c.conns = live
		c.mu.Unlock()
		for _, old := range ended {
			old.wait()
		}

		cc, err := dialConn(ctx, &c.cfg, c.tls)

		c.mu.Lock()
		c.dialing = nil
		close(done)
		if err == nil && c.closed {
			c.mu.Unlock()
			cc.close(errClientClosed)
			cc.wait()
			return nil, errClientClosed
		}
		if err == nil {
			c.cc = cc
			c.conns = append(c.conns, cc)
		}
		c.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			return nil, status.Errorf(codes.Unavailable, "h2grpc: connect to %s: %v", c.cfg.Address, err)
		}
		return cc, nil
	}
}

// Open starts a stream on path (e.g.
// "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources") and
// returns without waiting for the response headers (Istiod sends none before its first
// response); the first RecvMsgHeader waits for them. The stream ends (RST_STREAM) when ctx is
// done or Close is called; the caller must call Close when done with it.
func (c *Client) Open(ctx context.Context, path string) (*ClientStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	fields := [][2]string{
		{"content-type", "application/grpc"},
		{"te", "trailers"},
		{"user-agent", userAgent},
	}
	if c.cfg.Header != nil {
		extra, err := c.cfg.Header(sctx)
		if err != nil {
			cancel()
			if _, ok := status.FromError(err); ok {
				return nil, err
			}
			return nil, status.Errorf(codes.Unavailable, "h2grpc: request metadata: %v", err)
		}
		for k, v := range extra {
			if err := checkHeaderField(k, v); err != nil {
				cancel()
				return nil, err
			}
			name := strings.ToLower(k)
			// The caller's value of a default field replaces it, as it did in net/http's
			// request header.
			fields = slices.DeleteFunc(fields, func(f [2]string) bool { return f[0] == name })
			for _, val := range v {
				fields = append(fields, [2]string{name, val})
			}
		}
	}
	cc, err := c.conn(sctx)
	if err != nil {
		cancel()
		return nil, err
	}
	var h *h2stream
	for {
		h, err = cc.open(sctx, c.scheme, path, fields)
		if err != errGoAwayRefused {
			break
		}
		// The connection stopped taking streams before this one started: the next one.
		if cc, err = c.conn(sctx); err != nil {
			break
		}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	s := &ClientStream{
		ctx:       sctx,
		cancel:    cancel,
		h:         h,
		max:       c.cfg.MaxRecvMsgBytes,
		afterDone: make(chan struct{}),
	}
	s.stopAfter = context.AfterFunc(sctx, func() {
		defer close(s.afterDone)
		h.cc.reset(h, http2.ErrCodeCancel, status.FromContextError(sctx.Err()).Err())
	})
	return s, nil
}

// Close closes every connection, which ends every stream on them with Unavailable, and waits
// for every goroutine the Client started. Open fails afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns, c.cc = nil, nil
	c.mu.Unlock()
	for _, cc := range conns {
		cc.close(status.Error(codes.Unavailable, "h2grpc: client closed"))
	}
	for _, cc := range conns {
		cc.wait()
	}
	return nil
}

// checkHeaderField refuses metadata HTTP/2 cannot carry (RFC 9113 section 8.2.1: a field
// name is a lowercase-able token, a value has no NUL, CR or LF, nor other control characters
// but tab), naming it, instead of letting the transport fail the stream later.
func checkHeaderField(name string, values []string) error {
	if name == "" {
		return status.Error(codes.Internal, "h2grpc: request metadata with an empty name")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7F || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return status.Errorf(codes.Internal, "h2grpc: request metadata name %q is not an HTTP token", name)
		}
	}
	for _, v := range values {
		for i := 0; i < len(v); i++ {
			if c := v[i]; (c < ' ' && c != '\t') || c == 0x7F {
				return status.Errorf(codes.Internal, "h2grpc: request metadata %q has a control character in its value", name)
			}
		}
	}
	return nil
}
