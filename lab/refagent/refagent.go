// Package refagent is the reference xDS proxy of the performance harness: it forwards the way
// Istio's agent does, so Wingman's figures come with a ratio measured in the same run. Every
// message is decoded into envoy.service.discovery.v3 types and re-encoded, and every downstream
// stream (state of the world or Delta) gets a new upstream connection with its own TLS handshake
// and bearer token, as Istio's agent dials Istiod per Envoy stream.
package refagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// Config configures the reference proxy.
type Config struct {
	// Upstream is Istiod's host:port.
	Upstream string
	// RootCAFile verifies Istiod's certificate; empty means plaintext.
	RootCAFile string
	// ServerName is the name Istiod's certificate carries.
	ServerName string
	// TokenFile is read for each new upstream stream ("authorization: Bearer").
	TokenFile string
	// Metadata is sent on every upstream stream (ClusterID).
	Metadata map[string]string
	// MaxMessageBytes bounds messages both ways (default 64 MiB).
	MaxMessageBytes int
}

// Proxy is the reference ADS proxy. Immutable after New.
type Proxy struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	cfg   Config
	creds credentials.TransportCredentials
}

var _ discovery.AggregatedDiscoveryServiceServer = (*Proxy)(nil)

// New checks cfg and loads the roots.
func New(cfg Config) (*Proxy, error) {
	if cfg.Upstream == "" {
		return nil, errors.New("refagent: Upstream is required")
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 64 << 20
	}
	p := &Proxy{cfg: cfg, creds: insecure.NewCredentials()}
	if cfg.RootCAFile != "" {
		pemBytes, err := os.ReadFile(cfg.RootCAFile)
		if err != nil {
			return nil, fmt.Errorf("refagent: read roots %s: %w", cfg.RootCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("refagent: no certificate in %s", cfg.RootCAFile)
		}
		p.creds = credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: cfg.ServerName, MinVersion: tls.VersionTLS12})
	}
	return p, nil
}

// Serve serves ADS on l until ctx is done, then stops every stream.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(p.cfg.MaxMessageBytes), grpc.MaxSendMsgSize(p.cfg.MaxMessageBytes))
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, p)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
		srv.Stop()
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("refagent: serve: %w", err)
	}
}

// dial opens the new upstream connection of one downstream stream and the outgoing context.
func (p *Proxy) dial(ctx context.Context) (*grpc.ClientConn, context.Context, error) {
	cc, err := grpc.NewClient("passthrough:///"+p.cfg.Upstream, grpc.WithTransportCredentials(p.creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.cfg.MaxMessageBytes), grpc.MaxCallSendMsgSize(p.cfg.MaxMessageBytes)))
	if err != nil {
		return nil, nil, fmt.Errorf("refagent: dial %s: %w", p.cfg.Upstream, err)
	}
	md := metadata.MD{}
	for k, v := range p.cfg.Metadata {
		md.Set(k, v)
	}
	if p.cfg.TokenFile != "" {
		if tok, err := os.ReadFile(p.cfg.TokenFile); err == nil {
			md.Set("authorization", "Bearer "+strings.TrimSpace(string(tok)))
		}
	}
	return cc, metadata.NewOutgoingContext(ctx, md), nil
}

// pipe copies decoded messages down→up (requests Q) and up→down (responses R) until either
// side ends, then cancels the upstream stream and returns. As in Istio's agent, the copying
// goroutines are not waited for: one may be blocked in the downstream Recv or Send, which only
// return once the handler has returned and gRPC has ended the stream; each exits right after.
func pipe[Q, R any](down interface {
	Send(*R) error
	Recv() (*Q, error)
}, up interface {
	Send(*Q) error
	Recv() (*R, error)
}, cancel context.CancelFunc) error {
	errc := make(chan error, 2)
	go func() {
		for {
			req, err := down.Recv()
			if err != nil {
				errc <- err
				return
			}
			if err := up.Send(req); err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		for {
			resp, err := up.Recv()
			if err != nil {
				errc <- err
				return
			}
			if err := down.Send(resp); err != nil {
				errc <- err
				return
			}
		}
	}()
	err := <-errc
	cancel()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// StreamAggregatedResources proxies one state-of-the-world stream over a new connection.
func (p *Proxy) StreamAggregatedResources(down discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	cc, octx, err := p.dial(ctx)
	if err != nil {
		return err
	}
	defer cc.Close()
	up, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(octx)
	if err != nil {
		return fmt.Errorf("refagent: open upstream SotW stream: %w", err)
	}
	return pipe[discovery.DiscoveryRequest, discovery.DiscoveryResponse](down, up, cancel)
}

// DeltaAggregatedResources proxies one Delta stream over a new connection.
func (p *Proxy) DeltaAggregatedResources(down discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	cc, octx, err := p.dial(ctx)
	if err != nil {
		return err
	}
	defer cc.Close()
	up, err := discovery.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(octx)
	if err != nil {
		return fmt.Errorf("refagent: open upstream Delta stream: %w", err)
	}
	return pipe[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse](down, up, cancel)
}
