package mux

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/wingman-mesh/wingman/fastpath"
)

// A slow client must cost nothing upstream, and must not be handed responses that a newer one
// already replaced. gRPC's server SendMsg returns once a message is handed to the transport, and
// the next SendMsg blocks until that one has been written to the socket: a response popped from
// the queue then waits inside SendMsg, where it can no longer be coalesced or merged. So the
// send loop waits, before popping, until the connection has written what it last handed over;
// while it waits, newer responses coalesce (SotW) or merge (Delta) in the queue.

// pacedListener wraps every accepted connection in a pacedConn.
type pacedListener struct{ net.Listener }

func (l pacedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &pacedConn{Conn: c, waiters: map[chan struct{}]struct{}{}}, nil
}

// pacedConn counts the bytes written to the client and wakes the streams waiting for them.
type pacedConn struct {
	net.Conn
	written atomic.Int64

	mu      sync.Mutex // guards waiters
	waiters map[chan struct{}]struct{}
}

func (c *pacedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	c.mu.Lock()
	for ch := range c.waiters {
		signal(ch)
	}
	c.mu.Unlock()
	return n, err
}

// waitWritten waits until at least target bytes have been written on the connection.
func (c *pacedConn) waitWritten(ctx context.Context, target int64, wake chan struct{}) error {
	if c.written.Load() >= target {
		return nil
	}
	c.mu.Lock()
	c.waiters[wake] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, wake)
		c.mu.Unlock()
	}()
	for c.written.Load() < target {
		select {
		case <-wake:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// pacingCreds are plaintext transport credentials (the socket is local) that make a stream's
// pacedConn reachable from its context, through the peer's AuthInfo.
type pacingCreds struct{}

type pacingInfo struct {
	credentials.CommonAuthInfo
	conn *pacedConn
}

func (pacingInfo) AuthType() string { return "insecure" }

func (pacingCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	pc, _ := c.(*pacedConn)
	return c, pacingInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, conn: pc}, nil
}

func (pacingCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("mux: pacing credentials are server-side only")
}

func (pacingCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
}

func (pacingCreds) Clone() credentials.TransportCredentials { return pacingCreds{} }

func (pacingCreds) OverrideServerName(string) error { return nil }

// pacerOf returns the connection a stream's context belongs to, or nil when it is not paced.
func pacerOf(ctx context.Context) *pacedConn {
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(pacingInfo); ok {
			return info.conn
		}
	}
	return nil
}

// deltaMerger merges pending Delta responses of one type by resource name (fastpath's
// MergeDeltaResponses: wire bytes, no decoding). The queue calls it under its lock, which also
// guards the Peeker.
func deltaMerger() merger {
	var p fastpath.Peeker
	return func(older, newer fastpath.Frame) (fastpath.Frame, error) {
		b, err := p.MergeDeltaResponses(nil, older.Data, newer.Data) // sized exactly
		if err != nil {
			return fastpath.Frame{}, err
		}
		return fastpath.FrameOf(b), nil
	}
}
