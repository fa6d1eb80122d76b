package mux

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wingman-mesh/wingman/internal/unixsock"
	"github.com/wingman-mesh/wingman/transport/h2grpc"
)

// Proxy is the xDS proxy. Create it with New, serve with Run.
type Proxy struct {
	cfg            Config   // immutable after New
	agentTypeOrder []string // immutable: AgentTypes' keys, sorted
	up             opener   // immutable
	closeUp        func() error
	metrics        *metrics // immutable

	agentOwner atomic.Pointer[session]      // the session carrying the agent's own subscriptions
	health     atomic.Pointer[healthReport] // the latest ReportHealth; nil before the first
	live       atomic.Bool                  // an upstream stream has opened (laststate.go)

	mu       sync.Mutex // guards sessions
	sessions map[*session]struct{}

	wg sync.WaitGroup // goroutines started by goTracked
}

// New validates cfg and dials Istiod (without waiting for the connection to be up).
func New(cfg Config) (*Proxy, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	m := newMetrics(cfg.Registerer)
	up, err := dialUpstream(&cfg)
	if err != nil {
		return nil, err
	}
	return newProxy(cfg, up, up.close, m), nil
}

func newProxy(cfg Config, up opener, closeUp func() error, m *metrics) *Proxy {
	var order []string
	for t := range cfg.AgentTypes {
		order = append(order, t)
	}
	slices.Sort(order)
	return &Proxy{cfg: cfg, agentTypeOrder: order, up: up, closeUp: closeUp, metrics: m, sessions: map[*session]struct{}{}}
}

// goTracked runs f on a goroutine that Run waits for before returning.
func (p *Proxy) goTracked(f func()) { p.wg.Go(f) }

// Listen creates the Unix socket with Istio's modes (unixsock.Listen): the parent directory
// made, a stale socket replaced, the socket open to every local user (Envoy runs as another
// uid). The socket file appears only once it accepts connections.
func Listen(path string) (net.Listener, error) {
	l, err := unixsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("mux: %w", err)
	}
	return l, nil
}

// Run listens on the socket and serves until ctx is done, then closes every stream and the
// upstream connection and waits for its goroutines.
func (p *Proxy) Run(ctx context.Context) error {
	l, err := Listen(p.cfg.SocketPath)
	if err != nil {
		p.closeUp()
		return err
	}
	return p.Serve(ctx, l)
}

// Serve is Run on a listener the caller made.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	srv := p.newServer(ctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("mux: serve: %w", err)
	}
	srv.Stop() // streams are long-lived: a graceful stop would wait for the clients to leave
	if err == nil {
		<-errc
	}
	p.wg.Wait()
	p.closeUp()
	return err
}

func (p *Proxy) newServer(ctx context.Context) *h2grpc.Server {
	d := p.cfg.Downstream
	return h2grpc.NewServer(ctx, h2grpc.ServerConfig{
		MaxRecvMsgBytes:      d.MaxRecvMsgBytes,
		MaxConcurrentStreams: int(d.MaxConcurrentStreams),
		StreamWindow:         streamWindow,
		ConnWindow:           connWindow,
		KeepaliveTime:        d.KeepaliveTime,
		KeepaliveTimeout:     d.KeepaliveTimeout,
		// Istio's enforcement policy (pilot/pkg/grpc/grpc.go ServerOptions): MinTime Time/2.
		PingMinTime: d.KeepaliveTime / 2,
		Logger:      p.cfg.Logger,
	}, map[string]h2grpc.Handler{
		sotwMethod:  func(ss *h2grpc.ServerStream) error { return p.serve(ss, sotw{}) },
		deltaMethod: func(ss *h2grpc.ServerStream) error { return p.serve(ss, deltaProto{}) },
	})
}

func (p *Proxy) serve(ss downstream, proto protocol) error {
	s := newSession(p, proto, ss)
	p.mu.Lock()
	p.sessions[s] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.sessions, s)
		p.mu.Unlock()
	}()
	return s.run(ss.Context())
}

// QueueStats is what the proxy holds in memory for its clients, summed over open streams.
type QueueStats struct {
	Streams                     int
	Requests, Responses         int // bytes waiting now
	PeakRequests, PeakResponses int // the most ever waiting on one stream
	SupersededResponses         int // responses replaced (SotW) or merged into (Delta) by a newer one before delivery
}

// Stats reports the bytes queued in each direction.
func (p *Proxy) Stats() QueueStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := QueueStats{Streams: len(p.sessions)}
	for s := range p.sessions {
		b, peak, _ := s.reqQ.stats()
		st.Requests += b
		st.PeakRequests = max(st.PeakRequests, peak)
		b, peak, superseded := s.outQ.stats()
		if cut := s.streaming.Load(); cut != nil {
			now, _ := cut.heldBytes()
			b += now
		}
		st.Responses += b
		st.PeakResponses = max(st.PeakResponses, peak, int(s.streamPeak.Load()))
		st.SupersededResponses += superseded
	}
	return st
}
