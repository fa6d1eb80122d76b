package h2grpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

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
	// StreamWindow and ConnWindow are the receive flow-control windows (net/http's
	// HTTP2Config.MaxReceiveBufferPerStream and MaxReceiveBufferPerConnection): at most this
	// much of a stream's (the connection's) data is buffered unread. 0 chooses 1 MiB and
	// 4 MiB: enough to keep a TLS connection busy at local round-trip times while bounding
	// what a stalled reader holds. Valid: StreamWindow 64 KiB..2 GiB-1, ConnWindow
	// 64 KiB..2 GiB-1 and not below StreamWindow (net/http silently replaces values out of its
	// range by its defaults of 4 MiB / 1 GiB; we refuse them instead).
	StreamWindow, ConnWindow int
	// KeepaliveTime: after this long without a frame received, the client pings (net/http's
	// HTTP2Config.SendPingTimeout); KeepaliveTimeout: the connection is closed when the ping is
	// not answered within it (PingTimeout; 0 there means net/http's 15 s). 0: no pings.
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
// by the first Open after it is lost or stops taking streams (GOAWAY); every stream shares it.
type Client struct {
	// immutable after NewClient
	cfg    ClientConfig
	tr     *http.Transport
	scheme string

	mu      sync.Mutex         // guards the fields below
	cc      *http.ClientConn   // current connection; nil before the first dial
	retired []*http.ClientConn // connections taking no new streams, closed when their last stream ends
	dialing chan struct{}      // closed when the dial in progress ends; nil when none
	closed  bool
	wg      sync.WaitGroup // round-trip goroutines; Add only under mu while !closed
}

// NewClient checks cfg; it does not dial.
func NewClient(cfg ClientConfig) (*Client, error) {
	if _, _, err := net.SplitHostPort(cfg.Address); err != nil {
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
	tr := &http.Transport{
		// The request's own Accept-Encoding would make net/http decompress the body behind
		// our back; gRPC frames are never HTTP-compressed.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream:     cfg.StreamWindow,
			MaxReceiveBufferPerConnection: cfg.ConnWindow,
			SendPingTimeout:               cfg.KeepaliveTime,
			PingTimeout:                   cfg.KeepaliveTimeout,
		},
		Protocols: new(http.Protocols),
	}
	dial := cfg.Dial
	if dial == nil {
		dial = func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", cfg.Address)
		}
	}
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		return newReadBufferedConn(c), nil
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
		tc := cfg.TLS.Clone()
		tc.NextProtos = []string{"h2"}
		tr.TLSClientConfig = tc
		tr.Protocols.SetHTTP2(true)
		// Our own TLS dial, to refuse a server that negotiates no protocol: net/http would
		// speak HTTP/1.1 to it (found by TestClientRefusesTLSWithoutALPN, which hung). grpc-go
		// refuses such a server too (it enforces ALPN since 1.67).
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialH2TLS(ctx, network, addr, tc)
		}
	} else {
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return &Client{cfg: cfg, tr: tr, scheme: scheme}, nil
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

// conn returns a connection with a stream slot reserved on it (the caller must RoundTrip or
// Release once), dialling one (once, whatever the number of callers) when there is none or
// the current one takes no new streams. A connection that takes no new streams because the
// server sent GOAWAY (Istiod does at its MaxConnectionAge) or because it is at the server's
// stream limit is retired, not closed: its streams go on, and it is closed once they have
// all ended.
func (c *Client) conn(ctx context.Context) (*http.ClientConn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, errClientClosed
		}
		c.closeRetiredLocked()
		if c.cc != nil {
			if c.cc.Reserve() == nil {
				cc := c.cc
				c.mu.Unlock()
				return cc, nil
			}
			if c.cc.Err() != nil {
				c.cc.Close()
			} else {
				c.retired = append(c.retired, c.cc)
			}
			c.cc = nil
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
		c.mu.Unlock()

		cc, err := c.tr.NewClientConn(ctx, c.scheme, c.cfg.Address)

		c.mu.Lock()
		c.dialing = nil
		close(done)
		if err == nil && c.closed {
			cc.Close()
			cc, err = nil, errClientClosed
		}
		if err == nil {
			c.cc = cc
		}
		c.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			if _, ok := status.FromError(err); ok {
				return nil, err
			}
			return nil, status.Errorf(codes.Unavailable, "h2grpc: connect to %s: %v", c.cfg.Address, err)
		}
		// Loop to reserve a slot on it like on any live connection.
	}
}

// closeRetiredLocked closes the retired connections that have no stream left.
func (c *Client) closeRetiredLocked() {
	kept := c.retired[:0]
	for _, cc := range c.retired {
		if cc.InFlight() == 0 || cc.Err() != nil {
			cc.Close()
			continue
		}
		kept = append(kept, cc)
	}
	clear(c.retired[len(kept):])
	c.retired = kept
}

// Open starts a stream on path (e.g.
// "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources") and
// returns without waiting for the response headers (Istiod sends none before its first
// response); the first RecvMsgHeader waits for them. The stream ends (RST_STREAM) when ctx is
// done or Close is called; the caller must call Close when done with it.
func (c *Client) Open(ctx context.Context, path string) (*ClientStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	hdr := http.Header{
		"Content-Type": {"application/grpc"},
		"Te":           {"trailers"},
		"User-Agent":   {userAgent},
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
			hdr[http.CanonicalHeaderKey(k)] = v
		}
	}
	cc, err := c.conn(sctx)
	if err != nil {
		cancel()
		return nil, err
	}
	body := newSendPipe(sctx)
	req := (&http.Request{
		Method:     http.MethodPost,
		URL:        &url.URL{Scheme: c.scheme, Host: c.cfg.Address, Path: path},
		Host:       c.cfg.Address,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     hdr,
		Body:       body,
		// -1: length unknown, the body streams until CloseSend.
		ContentLength: -1,
	}).WithContext(sctx)
	s := &ClientStream{
		ctx:    sctx,
		cancel: cancel,
		body:   body,
		max:    c.cfg.MaxRecvMsgBytes,
		resc:   make(chan roundTripResult, 1),
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cc.Release()
		cancel()
		return nil, errClientClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		resp, err := cc.RoundTrip(req)
		if err != nil {
			// The transport does not always close the body of a request it refused
			// (ClientConn.RoundTrip's validation does not): a SendMsg waiting on it must
			// see the stream is over.
			body.Close()
		}
		s.resc <- roundTripResult{resp, err}
	}()
	return s, nil
}

type roundTripResult struct {
	resp *http.Response
	err  error
}

// Close closes the connection, which ends every stream on it with Unavailable, and waits for
// every goroutine the Client started. Open fails afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	cc := c.cc
	c.cc = nil
	retired := c.retired
	c.retired = nil
	c.mu.Unlock()
	var err error
	if cc != nil {
		err = cc.Close()
	}
	for _, r := range retired {
		r.Close()
	}
	c.wg.Wait()
	c.tr.CloseIdleConnections()
	return err
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

// dialH2TLS dials TLS with cfg and fails unless the server chose "h2" by ALPN.
func dialH2TLS(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		cfg.ServerName = host
	}
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if p := conn.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != "h2" {
		conn.Close()
		return nil, fmt.Errorf("server did not negotiate HTTP/2 by ALPN (got %q)", p)
	}
	return conn, nil
}
