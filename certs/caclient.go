package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	pb "istio.io/api/security/v1alpha1"
)

// caClient calls istio.v1.auth.IstioCertificateService/CreateCertificate.
// cfg is immutable after newCAClient; conn is guarded by mu.
type caClient struct {
	cfg *Config
	met *metrics

	mu   sync.Mutex
	conn *grpc.ClientConn // guarded by mu; nil until first use and after a failed sign
}

func newCAClient(cfg *Config, met *metrics) *caClient { return &caClient{cfg: cfg, met: met} }

// sign sends csrPEM and returns the raw cert_chain. Transient failures are retried up to
// cfg.CAAttempts times with jittered exponential backoff from 100ms; after a failed sign the
// connection is dropped so the next call dials afresh (re-reading the roots).
func (c *caClient) sign(ctx context.Context, csrPEM []byte) ([]string, error) {
	conn, err := c.connection()
	if err != nil {
		return nil, err
	}
	client := pb.NewIstioCertificateServiceClient(conn)
	req := &pb.IstioCertificateRequest{
		Csr:              string(csrPEM),
		ValidityDuration: int64(c.cfg.SecretTTL / time.Second),
		Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			"CertSigner": structpb.NewStringValue(c.cfg.CertSigner),
		}},
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		var resp *pb.IstioCertificateResponse
		resp, err = client.CreateCertificate(c.outgoing(ctx), req)
		if err == nil {
			return resp.GetCertChain(), nil
		}
		if attempt >= c.cfg.CAAttempts || !retryable(err) || ctx.Err() != nil {
			break
		}
		c.met.retries.Inc()
		wait := backoff/2 + rand.N(backoff)
		backoff *= 2
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	c.reset(conn)
	return nil, fmt.Errorf("CreateCertificate at %s: %w", c.cfg.CAAddr, err)
}

// warm dials the CA now (name resolution, TCP, TLS), so that the first CSR, still being made,
// finds the connection up. Errors are left to sign, which reports them.
func (c *caClient) warm() {
	if conn, err := c.connection(); err == nil {
		conn.Connect()
	}
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted,
		codes.Internal, codes.Unavailable:
		return true
	}
	return false
}

// outgoing adds the per-call metadata: the bearer token read now, ClusterID and CA_HEADER_*.
func (c *caClient) outgoing(ctx context.Context) context.Context {
	kv := make([]string, 0, 4+2*len(c.cfg.CAHeaders))
	if tok, err := os.ReadFile(c.cfg.TokenPath); err == nil {
		if t := strings.TrimSpace(string(tok)); t != "" {
			kv = append(kv, "authorization", "Bearer "+t)
		}
	}
	if c.cfg.ClusterID != "" {
		kv = append(kv, "ClusterID", c.cfg.ClusterID)
	}
	for k, v := range c.cfg.CAHeaders {
		kv = append(kv, k, v)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func (c *caClient) connection() (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		return c.conn, nil
	}
	creds, err := c.credentials()
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(c.cfg.CAAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("dial CA %s: %w", c.cfg.CAAddr, err)
	}
	c.conn = conn
	return conn, nil
}

// reset drops conn if it is still the current connection.
func (c *caClient) reset(conn *grpc.ClientConn) {
	c.mu.Lock()
	if c.conn == conn {
		c.conn = nil
	}
	c.mu.Unlock()
	_ = conn.Close()
}

func (c *caClient) close() {
	c.mu.Lock()
	conn := c.conn
	c.conn = nil
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// credentials: plaintext on :15010 (Istio's rule), else TLS with the configured roots and server
// name, and the PROV_CERT client certificate loaded per handshake when present.
func (c *caClient) credentials() (credentials.TransportCredentials, error) {
	if strings.HasSuffix(c.cfg.CAAddr, ":15010") {
		return insecure.NewCredentials(), nil
	}
	var roots *x509.CertPool
	switch c.cfg.CARootPath {
	case "":
		return nil, errors.New("CA root certificate path is empty and the CA is not plaintext :15010")
	case SystemRoots:
		var err error
		if roots, err = x509.SystemCertPool(); err != nil {
			return nil, fmt.Errorf("system root pool: %w", err)
		}
	default:
		b, err := os.ReadFile(c.cfg.CARootPath)
		if err != nil {
			return nil, fmt.Errorf("read CA roots: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA roots %s: no PEM certificate", c.cfg.CARootPath)
		}
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots,
		ServerName: CAServerName(c.cfg.CAAddr, c.cfg.IstiodSAN),
	}
	if dir := c.cfg.ProvCertDir; dir != "" {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			kp, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert-chain.pem"), filepath.Join(dir, "key.pem"))
			if err != nil || kp.Leaf == nil || time.Now().After(kp.Leaf.NotAfter) {
				return &tls.Certificate{}, nil // token only, as Istio does for missing or expired certs
			}
			return &kp, nil
		}
	}
	return credentials.NewTLS(tc), nil
}
