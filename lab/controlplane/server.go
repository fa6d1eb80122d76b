package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/lab/testca"
)

// ServerName is the DNS name in the serving certificate: Istiod's name as the agent expects it
// (its ISTIOD_SAN).
const ServerName = testca.ServerName

// servingValidity is how long the serving certificate is valid: for as long as anyone keeps a
// meshlab running.
const servingValidity = 10 * 365 * 24 * time.Hour

// Config configures a Server. Token and Types are required.
type Config struct {
	// Token is the bearer token every xDS stream on the TLS port must carry (the CA checks
	// its own).
	Token string
	// Metadata is further gRPC metadata every xDS stream on the TLS port must carry, each key
	// once with exactly this value (Istio's agent sends ClusterID, for one).
	Metadata map[string]string
	// Types are the type URLs served, one LinearCache each per partition; a request for any
	// other type fails its stream.
	Types []string
	// Partitions and Partition split clients: each partition has caches of its own, and
	// Partition names the one a request's node belongs to (it must be one of Partitions). Nil
	// serves every client from one partition, "".
	Partitions []string
	Partition  func(*core.Node) string
	// VersionPrefixes starts each cache's versions with the type's short name and a dash
	// (cds-1, lds-1, NameTable-1), so that a version names its type.
	VersionPrefixes bool
	// CA, when set, serves istio.v1.auth.IstioCertificateService on the TLS port.
	CA *testca.CA
	// Callbacks, when set, receive go-control-plane's stream events on both ports.
	Callbacks serverv3.Callbacks
	// Logger receives refused streams (nil → discard).
	Logger *slog.Logger
	// StreamInterceptor, when set, wraps every stream on both ports, after the token check
	// (a fault harness times the server's sends through it).
	StreamInterceptor grpc.StreamServerInterceptor
}

// Server is the stand-in. Its methods are safe for concurrent use.
type Server struct {
	cfg      Config                          // immutable after New
	rootPEM  []byte                          // immutable after New
	serving  tls.Certificate                 // immutable after New
	caches   map[string]*cachev3.LinearCache // immutable map after New, by cacheKey
	cache    *cachev3.MuxCache               // immutable after New
	accepted atomic.Int64                    // TLS connections accepted, over every Serve

	mu   sync.Mutex         // guards the fields below (the background server of Start)
	addr string             // host:port of the last Start, kept across Stop for Restart
	stop context.CancelFunc // ends the running background Serve; nil while stopped
	done chan error         // receives that Serve's result
}

// New builds the serving certificate and the caches.
func New(cfg Config) (*Server, error) {
	if cfg.Token == "" {
		return nil, errors.New("controlplane: Token is required")
	}
	if len(cfg.Types) == 0 {
		return nil, errors.New("controlplane: Types is required")
	}
	if cfg.Partitions == nil {
		cfg.Partitions, cfg.Partition = []string{""}, func(*core.Node) string { return "" }
	} else if cfg.Partition == nil {
		return nil, errors.New("controlplane: Partitions without Partition")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rootPEM, serving, err := testca.ServingPKI(servingValidity, ServerName, "istiod", "localhost")
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	s := &Server{cfg: cfg, rootPEM: rootPEM, serving: serving, caches: map[string]*cachev3.LinearCache{}}
	// go-control-plane puts the stream's node on every request, so each request is classified
	// by its client's partition.
	s.cache = &cachev3.MuxCache{
		Classify:      func(r *cachev3.Request) string { return cacheKey(cfg.Partition(r.GetNode()), r.GetTypeUrl()) },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return cacheKey(cfg.Partition(r.GetNode()), r.GetTypeUrl()) },
		Caches:        map[string]cachev3.Cache{},
	}
	for _, p := range cfg.Partitions {
		for _, typ := range cfg.Types {
			var opts []cachev3.LinearCacheOption
			if cfg.VersionPrefixes {
				opts = append(opts, cachev3.WithVersionPrefix(ShortType(typ)+"-"))
			}
			c := cachev3.NewLinearCache(typ, opts...)
			s.caches[cacheKey(p, typ)], s.cache.Caches[cacheKey(p, typ)] = c, c
		}
	}
	return s, nil
}

func cacheKey(partition, typeURL string) string { return partition + "|" + typeURL }

// ShortType is the name a type's versions start with under VersionPrefixes: cds and lds for
// Clusters and Listeners, the message name for any other type.
func ShortType(typeURL string) string {
	switch typeURL {
	case resourcev3.ClusterType:
		return "cds"
	case resourcev3.ListenerType:
		return "lds"
	}
	return typeURL[strings.LastIndexByte(typeURL, '.')+1:]
}

// Cache is the cache of typeURL of the one partition; nil for a type not served.
func (s *Server) Cache(typeURL string) *cachev3.LinearCache { return s.caches[cacheKey("", typeURL)] }

// PartitionCache is the cache of typeURL of a partition; nil for one not served.
func (s *Server) PartitionCache(partition, typeURL string) *cachev3.LinearCache {
	return s.caches[cacheKey(partition, typeURL)]
}

// ServingCertificate is the TLS port's certificate (verified by RootPEM for ServerName), for a
// stand-in that must pass the agent's verification before it misbehaves.
func (s *Server) ServingCertificate() tls.Certificate { return s.serving }

// RootPEM is the root that verifies the serving certificate.
func (s *Server) RootPEM() []byte { return append([]byte(nil), s.rootPEM...) }

// Accepted is how many TLS connections have been accepted, over every Serve and Start.
func (s *Server) Accepted() int64 { return s.accepted.Load() }

// Serve serves xDS (and the CA, when configured) over TLS on lis until ctx is done, then stops
// the server and returns nil; lis is closed on return. It may be called again with a new
// listener after it returns, as an Istiod restart.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	srv := s.newServer(ctx, true)
	return serve(ctx, srv, countingListener{lis, &s.accepted}, 0)
}

// ServeGraceful is Serve, except that when ctx is done the server first sends GOAWAY to every
// connection (grpc's GracefulStop), waits up to grace for the streams to end, and only then
// closes what is left: an Istiod that goes away politely in the middle of a push.
func (s *Server) ServeGraceful(ctx context.Context, lis net.Listener, grace time.Duration) error {
	srv := s.newServer(context.WithoutCancel(ctx), true)
	return serve(ctx, srv, countingListener{lis, &s.accepted}, grace)
}

// ServePlaintext serves xDS alone, without TLS or the token check, on lis until ctx is done, as
// Istiod's 15010; lis is closed on return.
func (s *Server) ServePlaintext(ctx context.Context, lis net.Listener) error {
	return serve(ctx, s.newServer(ctx, false), lis, 0)
}

// serve runs srv on lis until ctx is done; a grace above zero sends GOAWAY first and stops
// hard after it.
func serve(ctx context.Context, srv *grpc.Server, lis net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		if grace > 0 {
			graceful := make(chan struct{})
			go func() { srv.GracefulStop(); close(graceful) }()
			t := time.NewTimer(grace)
			select {
			case <-graceful:
			case <-t.C:
			}
			t.Stop()
			srv.Stop()
			<-graceful
		} else {
			srv.Stop()
		}
		<-errc
		return nil
	case err := <-errc:
		srv.Stop()
		return fmt.Errorf("controlplane: serve on %s: %w", lis.Addr(), err)
	}
}

// newServer builds a gRPC server carrying ADS over the caches (and, with TLS, the token check
// and the CA) whose xDS streams end with ctx.
func (s *Server) newServer(ctx context.Context, secure bool) *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(256 << 20), grpc.MaxSendMsgSize(256 << 20),
		grpc.InitialWindowSize(1 << 20), grpc.InitialConnWindowSize(4 << 20),
		// The agent pings every 30s (GRPC_KEEPALIVE_INTERVAL); grpc's default policy would
		// answer that with GOAWAY.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	var icpt []grpc.StreamServerInterceptor
	if secure {
		opts = append(opts,
			grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{s.serving},
				MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert})))
		icpt = append(icpt, s.authStream)
	}
	if s.cfg.StreamInterceptor != nil {
		icpt = append(icpt, s.cfg.StreamInterceptor)
	}
	if len(icpt) > 0 {
		opts = append(opts, grpc.ChainStreamInterceptor(icpt...))
	}
	srv := grpc.NewServer(opts...)
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, serverv3.NewServer(ctx, s.cache, s.cfg.Callbacks))
	if secure && s.cfg.CA != nil {
		s.cfg.CA.Register(srv)
	}
	return srv
}

// authStream refuses streams without the bearer token or the required metadata. Only xDS is a
// stream: the CA's CreateCertificate is unary and checks the token itself.
func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+s.cfg.Token {
		s.cfg.Logger.Warn("controlplane: xDS stream refused: missing or wrong bearer token", "method", info.FullMethod)
		return status.Error(codes.Unauthenticated, "controlplane: missing or wrong bearer token")
	}
	for k, want := range s.cfg.Metadata {
		if got := md.Get(k); len(got) != 1 || got[0] != want {
			s.cfg.Logger.Warn("controlplane: xDS stream refused: metadata", "key", k, "got", got, "want", want)
			return status.Errorf(codes.Unauthenticated, "controlplane: metadata %s is %q, want %q", k, got, want)
		}
	}
	return h(srv, ss)
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
