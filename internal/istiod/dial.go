package istiod

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
)

// Dial returns a client connection to cfg.Address with the transport, token and metadata policy of
// cfg, then opts (the caller's own: codec limits, backoff, window sizes). It fails at once when
// the roots cannot be read. The connection is lazy: call Connect to dial now.
func Dial(cfg Config, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	creds, err := transport(&cfg)
	if err != nil {
		return nil, err
	}
	all := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(tokenCreds{file: cfg.TokenFile}),
	}
	if kv := headers(&cfg); len(kv) > 0 {
		all = append(all,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				return invoker(metadata.AppendToOutgoingContext(ctx, kv...), method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(metadata.AppendToOutgoingContext(ctx, kv...), desc, cc, method, opts...)
			}))
	}
	if cfg.KeepaliveTime > 0 {
		all = append(all, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout, PermitWithoutStream: true}))
	}
	cc, err := grpc.NewClient("passthrough:///"+cfg.Address, append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("istiod %q: %w", cfg.Address, err)
	}
	return cc, nil
}

// headers is the metadata sent on every call, as key, value pairs.
func headers(cfg *Config) []string {
	kv := make([]string, 0, 2+2*len(cfg.Metadata))
	if cfg.ClusterID != "" {
		kv = append(kv, "ClusterID", cfg.ClusterID)
	}
	for k, v := range cfg.Metadata {
		kv = append(kv, k, v)
	}
	return kv
}

// transport is plaintext or TLS 1.2+ verified against the roots, re-read when they change, so a
// root rotation takes effect at the next handshake.
func transport(cfg *Config) (credentials.TransportCredentials, error) {
	if cfg.IsPlaintext() {
		return insecure.NewCredentials(), nil
	}
	tc, err := tlsConfig(cfg)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(tc), nil
}

// tlsConfig is TLS 1.2+ verified against the roots, re-read when they change.
func tlsConfig(cfg *Config) (*tls.Config, error) {
	roots := &rootPool{file: cfg.RootCAFile}
	if _, err := roots.get(); err != nil {
		return nil, err
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: cfg.ServerName,
		// Verification is done in VerifyConnection against the current roots.
		InsecureSkipVerify:   true,
		VerifyConnection:     roots.verify(cfg.ServerName),
		GetClientCertificate: cfg.ClientCertificate,
	}
	if err := applyCompliance(tc, cfg.CompliancePolicy); err != nil {
		return nil, err
	}
	return tc, nil
}

// tokenCreds sends the bearer token read fresh from a file on every call. Immutable.
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
		return nil, fmt.Errorf("istiod: read token %s: %w", t.file, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity is false: on Istiod's plaintext port the token is sent too.
func (tokenCreds) RequireTransportSecurity() bool { return false }
