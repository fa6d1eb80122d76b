package perf

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/wingman-mesh/wingman/lab/testca"
)

// Type URLs the control plane serves.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	// IstiodName is the name in the control plane's serving certificate.
	IstiodName = testca.ServerName
	// Token is the bearer token the control plane and the CA require.
	Token = "perf-token"
)

// ControlPlane is an Istiod stand-in: go-control-plane's server over LinearCaches, and the CA,
// on one TLS port with a token check, plus a plaintext xDS port for direct measurements.
type ControlPlane struct {
	CA      *testca.CA
	RootPEM []byte // verifies the TLS port

	serving tls.Certificate                 // immutable
	caches  map[string]*cachev3.LinearCache // immutable map
	cache   cachev3.Cache                   // immutable
	ctx     context.Context                 // immutable: the server's lifetime
	accepts atomic.Int64                    // TLS connections accepted
	pushMu  sync.Mutex                      // serialises Push; guards version
	version map[string]uint64               // per type: the LinearCache's version counter
	mu      sync.Mutex                      // guards the fields below
	addr    string                          // TLS host:port (kept across Restart)
	srv     *grpc.Server                    // TLS server; nil while stopped
	done    chan struct{}                   // closed when srv's Serve returns
	plain   *grpc.Server                    // plaintext server
	plainL  net.Listener                    // plaintext listener
	pdone   chan struct{}                   // closed when plain's Serve returns
}

// ControlPlaneConfig configures StartControlPlane.
type ControlPlaneConfig struct {
	// CertTTL is the most the CA signs for (short for rotation scenarios; default 24h).
	CertTTL time.Duration
}

// StartControlPlane starts both ports on loopback; ctx bounds its life, Close stops it.
func StartControlPlane(ctx context.Context, cfg ControlPlaneConfig) (*ControlPlane, error) {
	ca, err := testca.New(testca.Config{Token: Token, TTL: cfg.CertTTL})
	if err != nil {
		return nil, fmt.Errorf("control plane: CA: %w", err)
	}
	rootPEM, serving, err := servingPKI()
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{CA: ca, RootPEM: rootPEM, serving: serving, ctx: ctx,
		caches: map[string]*cachev3.LinearCache{}, version: map[string]uint64{}}
	mc := &cachev3.MuxCache{
		Classify:      func(r *cachev3.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return r.GetTypeUrl() },
		Caches:        map[string]cachev3.Cache{},
	}
	for _, t := range []string{ClusterType, ListenerType} {
		c := cachev3.NewLinearCache(t, cachev3.WithVersionPrefix(shortType(t)+"-"))
		cp.caches[t], mc.Caches[t] = c, c
	}
	cp.cache = mc
	if err := cp.startTLS("127.0.0.1:0"); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cp.Close()
		return nil, fmt.Errorf("control plane: plaintext listen: %w", err)
	}
	cp.plain, cp.plainL, cp.pdone = cp.newServer(nil), l, make(chan struct{})
	go func() { defer close(cp.pdone); _ = cp.plain.Serve(l) }()
	return cp, nil
}

func shortType(t string) string {
	switch t {
	case ClusterType:
		return "cds"
	case ListenerType:
		return "lds"
	}
	return t[strings.LastIndexByte(t, '.')+1:]
}

// servingPKI makes a root and an Istiod serving certificate signed by it.
func servingPKI() ([]byte, tls.Certificate, error) {
	root, cert, err := testca.ServingPKI(48*time.Hour, IstiodName, "localhost")
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("control plane: %w", err)
	}
	return root, cert, nil
}

// newServer builds a gRPC server with ADS (and, with TLS, the CA and the token check).
func (cp *ControlPlane) newServer(creds credentials.TransportCredentials) *grpc.Server {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(256 << 20), grpc.MaxSendMsgSize(256 << 20),
		grpc.InitialWindowSize(1 << 20), grpc.InitialConnWindowSize(4 << 20)}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds), grpc.StreamInterceptor(tokenCheck))
	}
	srv := grpc.NewServer(opts...)
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, serverv3.NewServer(cp.ctx, cp.cache, nil))
	if creds != nil {
		cp.CA.Register(srv)
	}
	return srv
}

func tokenCheck(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+Token {
		return status.Errorf(codes.Unauthenticated, "bad token %q", got)
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

func (cp *ControlPlane) startTLS(addr string) error {
	var l net.Listener
	var err error
	for range 100 { // a just-closed port can take a moment to free
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		select {
		case <-cp.ctx.Done():
			return fmt.Errorf("control plane: listen on %s: %w", addr, cp.ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("control plane: listen on %s: %w", addr, err)
	}
	srv := cp.newServer(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cp.serving},
		MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}))
	done := make(chan struct{})
	cp.mu.Lock()
	cp.addr, cp.srv, cp.done = l.Addr().String(), srv, done
	cp.mu.Unlock()
	go func() { defer close(done); _ = srv.Serve(countingListener{l, &cp.accepts}) }()
	return nil
}

// Addr is the TLS host:port (xDS and CA).
func (cp *ControlPlane) Addr() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.addr
}

// PlainAddr is the plaintext xDS host:port used for direct measurements.
func (cp *ControlPlane) PlainAddr() string { return cp.plainL.Addr().String() }

// Accepted is how many TLS connections the control plane has accepted (upstream connections
// opened by agents, CA connections included).
func (cp *ControlPlane) Accepted() int64 { return cp.accepts.Load() }

// Restart stops the TLS server (closing every agent's stream), waits pause, and serves again on
// the same port, as an Istiod restart behind a stable address.
func (cp *ControlPlane) Restart(pause time.Duration) error {
	cp.stopTLS()
	select {
	case <-cp.ctx.Done():
		return cp.ctx.Err()
	case <-time.After(pause):
	}
	return cp.startTLS(cp.Addr())
}

func (cp *ControlPlane) stopTLS() {
	cp.mu.Lock()
	srv, done := cp.srv, cp.done
	cp.srv = nil
	cp.mu.Unlock()
	if srv != nil {
		srv.Stop()
		<-done
	}
}

// Close stops both servers and waits for them.
func (cp *ControlPlane) Close() {
	cp.stopTLS()
	if cp.plain != nil {
		cp.plain.Stop()
		<-cp.pdone
	}
}

// Push replaces the resources of type typ and returns the version the cache will send and the
// time the update was made (the start of push latency).
func (cp *ControlPlane) Push(typ string, res map[string]types.Resource) (string, time.Time, error) {
	c, ok := cp.caches[typ]
	if !ok {
		return "", time.Time{}, fmt.Errorf("control plane: no cache for type %s", typ)
	}
	cp.pushMu.Lock()
	defer cp.pushMu.Unlock() // held so versions and updates stay in order
	cp.version[typ]++
	v := shortType(typ) + "-" + strconv.FormatUint(cp.version[typ], 10)
	t0 := time.Now()
	c.SetResources(res)
	return v, t0, nil
}

// Clusters builds n EDS clusters totalling about size bytes; tag makes each push differ.
func Clusters(n, size int, tag string) map[string]types.Resource {
	filler := strings.Repeat("x", max(size/max(n, 1)-60, 1))
	out := make(map[string]types.Resource, n)
	for k := range n {
		name := fmt.Sprintf("outbound|80||svc-%05d.ns.svc.cluster.local", k)
		out[name] = &cluster.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Second),
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{ServiceName: tag + filler}}
	}
	return out
}

// Listeners builds n empty listeners.
func Listeners(n int) map[string]types.Resource {
	out := make(map[string]types.Resource, n)
	for k := range n {
		name := fmt.Sprintf("0.0.0.0_%d", 8000+k)
		out[name] = &listener.Listener{Name: name}
	}
	return out
}
