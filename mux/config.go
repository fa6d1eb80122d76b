package mux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/metric"
	istiodc "github.com/wingman-mesh/wingman/transport/istiod" // mux tests declare an istiod stand-in
)

// Handler consumes the resources of one of the agent's own subscriptions (the Any.value bytes
// of each resource, in order). A nil error ACKs the response; an error NACKs it with the error's
// text. Handlers run on the stream's receive goroutine and must not block for long.
type Handler func(resources [][]byte) error

// Rewriter may replace a response of the type it is registered for (Config.Rewriters) before it
// is forwarded; cmd registers the Wasm remote-load rewrite for ECDS. It owns in and returns the
// frame to forward; an error NACKs the response upstream and it is not forwarded. It runs on a
// goroutine of the session's own for its type (rewrite.go), so it may wait (a module fetch)
// without holding up other types or streams; the type's responses keep their order. It stops
// early, returning an error, when ctx is done (the response was superseded).
type Rewriter func(ctx context.Context, in fastpath.Frame, delta bool) (fastpath.Frame, error)

// Config is everything the proxy needs; cmd/ builds it from flags and environment.
type Config struct {
	// SocketPath is the Unix socket Envoy connects to (Istio: ./etc/istio/proxy/XDS).
	SocketPath string
	// Upstream describes the one connection to Istiod.
	Upstream UpstreamConfig
	// MaxMessageBytes bounds every message in both directions (default 64 MiB).
	MaxMessageBytes int
	// Downstream are the limits of the server on the XDS socket, as Istio's agent sets them for
	// Envoy's side (pilot/pkg/grpc ServerOptions).
	Downstream DownstreamLimits
	// QueueBytes bounds the Delta messages waiting in each direction of a stream before the
	// sender is made to wait (default 16 MiB). State-of-the-world messages coalesce instead.
	QueueBytes int
	// AgentTypes are the agent's own subscriptions, by type URL: their responses are consumed
	// by the handler and ACKed or NACKed by the agent, never forwarded. They are subscribed after
	// a client's first Listener request, as Istio does.
	AgentTypes map[string]Handler
	// ReportHealth makes the session carrying the agent's requests send the health given to
	// Proxy.ReportHealth (ProxyConfig readinessProbe), even when AgentTypes is empty.
	ReportHealth bool
	// Rewriters, by type URL, see every response of their type before it is forwarded (a type
	// cannot be both an agent type and rewritten).
	Rewriters map[string]Rewriter
	// Recorder, when set, hears what each client is sent and accepts (laststate.go).
	Recorder Recorder
	// Restore, when set, serves restored responses until Istiod is reached (laststate.go).
	Restore Restorer
	// CloseOnUpstreamLoss restores Istio's behaviour: when the upstream stream fails, the
	// downstream stream is closed with the upstream's error instead of being kept open.
	CloseOnUpstreamLoss bool
	// Backoff is the reconnection backoff (default 100ms doubling to 15s, ±50% jitter).
	Backoff    Backoff
	Logger     *slog.Logger
	Registerer *metric.Registry // nil: counted, not exported
}

// UpstreamConfig describes how to reach Istiod (address, plaintext rule, roots, server name,
// client certificate, token, ClusterID and XDS_HEADER_* metadata, keepalive: defaults 30s and
// 10s, as Istio).
type UpstreamConfig = istiodc.Config

// Backoff is a jittered exponential backoff.
type Backoff struct {
	Base, Max time.Duration
}

const (
	// HTTP/2 receive windows, both sides. They bound what a peer may send unread: with
	// cut-through the proxy reads as it forwards, so a window only needs to cover the time to
	// forward it (16 MiB windows let a 10 MB push sit whole in the transport: 12 MB peak heap in
	// TestGatePeakHeap10MB).
	streamWindow      = 512 << 10
	connWindow        = 4 << 20
	defaultMaxMessage = 64 << 20
	defaultQueueBytes = 16 << 20
)

// DownstreamLimits are the gRPC server settings of the XDS socket.
type DownstreamLimits struct {
	// MaxRecvMsgBytes bounds a request from Envoy (ISTIO_GPRC_MAXRECVMSGSIZE, default 4 MiB);
	// never more than MaxMessageBytes.
	MaxRecvMsgBytes int
	// MaxConcurrentStreams per connection (ISTIO_GPRC_MAXSTREAMS, default 100000).
	MaxConcurrentStreams uint32
	// KeepaliveTime and KeepaliveTimeout of the server's pings (GRPC_KEEPALIVE_INTERVAL and
	// GRPC_KEEPALIVE_TIMEOUT, defaults 30s and 10s); clients may ping every KeepaliveTime/2.
	KeepaliveTime, KeepaliveTimeout time.Duration
}

func (c *Config) setDefaults() error {
	if c.SocketPath == "" {
		return errors.New("mux: SocketPath is required")
	}
	if c.Upstream.Address == "" {
		return errors.New("mux: Upstream.Address is required")
	}
	for typeURL := range c.Rewriters {
		if _, ok := c.AgentTypes[typeURL]; ok {
			return fmt.Errorf("mux: %s is both an agent type and rewritten", typeURL)
		}
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = defaultMaxMessage
	}
	d := &c.Downstream
	if d.MaxRecvMsgBytes <= 0 {
		d.MaxRecvMsgBytes = 4 << 20
	}
	d.MaxRecvMsgBytes = min(d.MaxRecvMsgBytes, c.MaxMessageBytes)
	if d.MaxConcurrentStreams == 0 {
		d.MaxConcurrentStreams = 100000
	}
	if d.KeepaliveTime <= 0 {
		d.KeepaliveTime = 30 * time.Second
	}
	if d.KeepaliveTimeout <= 0 {
		d.KeepaliveTimeout = 10 * time.Second
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = defaultQueueBytes
	}
	if c.Backoff.Base <= 0 {
		c.Backoff.Base = 100 * time.Millisecond
	}
	if c.Backoff.Max < c.Backoff.Base {
		c.Backoff.Max = 15 * time.Second
	}
	if c.Upstream.KeepaliveTime <= 0 {
		c.Upstream.KeepaliveTime = 30 * time.Second
	}
	if c.Upstream.KeepaliveTimeout <= 0 {
		c.Upstream.KeepaliveTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
