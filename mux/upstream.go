package mux

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/wingman-mesh/wingman/fastpath"
)

const (
	adsService  = "envoy.service.discovery.v3.AggregatedDiscoveryService"
	sotwMethod  = "/" + adsService + "/StreamAggregatedResources"
	deltaMethod = "/" + adsService + "/DeltaAggregatedResources"
)

// upstreamStream is what a session needs of an upstream stream.
type upstreamStream interface {
	SendMsg(any) error
	RecvMsg(any) error
}

// opener opens upstream streams; the real one shares one grpc.ClientConn.
type opener interface {
	open(ctx context.Context, delta bool) (upstreamStream, error)
}

// grpcUpstream is the one connection to Istiod. Immutable after dialUpstream.
type grpcUpstream struct {
	cc       *grpc.ClientConn
	md       metadata.MD
	callOpts []grpc.CallOption
}

var _ opener = (*grpcUpstream)(nil)

func dialUpstream(cfg *Config) (*grpcUpstream, error) {
	u := cfg.Upstream
	var creds credentials.TransportCredentials
	if u.Plaintext {
		creds = insecure.NewCredentials()
	} else {
		roots := &rootPool{file: u.RootCAFile}
		if _, err := roots.get(); err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(&tls.Config{
			MinVersion: tls.VersionTLS12,
			ServerName: u.ServerName,
			// Verification is done in VerifyConnection against roots re-read when the file
			// changes, so a root rotation takes effect at the next handshake.
			InsecureSkipVerify:   true,
			VerifyConnection:     roots.verify(u.ServerName),
			GetClientCertificate: u.ClientCertificate,
		})
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(tokenCreds{file: u.TokenFile}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: u.KeepaliveTime, Timeout: u.KeepaliveTimeout, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: cfg.Backoff.Base, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.Backoff.Max},
			MinConnectTimeout: 5 * time.Second,
		}),
		// Large windows and buffers: a multi-megabyte push crosses in a few system calls and
		// without waiting for window updates. They bound what Istiod may send unread; the
		// proxy reads continuously, and its own queues are bounded separately.
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithReadBufferSize(ioBuffer),
		grpc.WithWriteBufferSize(ioBuffer),
	}
	cc, err := grpc.NewClient("passthrough:///"+u.Address, opts...)
	if err != nil {
		return nil, fmt.Errorf("mux: upstream %q: %w", u.Address, err)
	}
	cc.Connect() // dial now, so the first stream finds the connection ready
	md := metadata.MD{}
	for k, v := range u.Metadata {
		md.Set(k, v)
	}
	return &grpcUpstream{cc: cc, md: md, callOpts: []grpc.CallOption{
		grpc.ForceCodecV2(fastpath.Codec{}),
		grpc.WaitForReady(true),
		grpc.MaxCallRecvMsgSize(cfg.MaxMessageBytes),
		grpc.MaxCallSendMsgSize(cfg.MaxMessageBytes),
	}}, nil
}

var (
	sotwDesc  = &grpc.StreamDesc{StreamName: "StreamAggregatedResources", ServerStreams: true, ClientStreams: true}
	deltaDesc = &grpc.StreamDesc{StreamName: "DeltaAggregatedResources", ServerStreams: true, ClientStreams: true}
)

func (g *grpcUpstream) open(ctx context.Context, delta bool) (upstreamStream, error) {
	if len(g.md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, g.md)
	}
	if delta {
		return g.cc.NewStream(ctx, deltaDesc, deltaMethod, g.callOpts...)
	}
	return g.cc.NewStream(ctx, sotwDesc, sotwMethod, g.callOpts...)
}

func (g *grpcUpstream) close() error { return g.cc.Close() }

// tokenCreds sends the bearer token read fresh from a file on every RPC. Immutable.
type tokenCreds struct{ file string }

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if t.file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(t.file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil // as Istio: no token, no header
		}
		return nil, fmt.Errorf("mux: read token %s: %w", t.file, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

func (tokenCreds) RequireTransportSecurity() bool { return false }

// rootPool caches the roots from a PEM file, reloading it when its content changes.
type rootPool struct {
	file string // immutable

	mu   sync.Mutex // guards the fields below
	raw  []byte
	pool *x509.CertPool
}

func (r *rootPool) get() (*x509.CertPool, error) {
	if r.file == "" {
		return x509.SystemCertPool()
	}
	b, err := os.ReadFile(r.file)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.pool != nil {
			return r.pool, nil // keep the last good roots while the file is being replaced
		}
		return nil, fmt.Errorf("mux: read root CA %s: %w", r.file, err)
	}
	if r.pool != nil && bytes.Equal(b, r.raw) {
		return r.pool, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		if r.pool != nil {
			return r.pool, nil
		}
		return nil, fmt.Errorf("mux: root CA %s holds no PEM certificate", r.file)
	}
	r.raw, r.pool = b, pool
	return pool, nil
}

func (r *rootPool) verify(serverName string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("mux: Istiod presented no certificate")
		}
		pool, err := r.get()
		if err != nil {
			return err
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: serverName, Roots: pool, Intermediates: inter})
		if err != nil {
			return fmt.Errorf("mux: verify Istiod certificate for %q: %w", serverName, err)
		}
		return nil
	}
}
