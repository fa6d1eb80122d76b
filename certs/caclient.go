package certs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	pb "istio.io/api/security/v1alpha1"

	"github.com/wingman-mesh/wingman/internal/istiod"
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
// connection is dropped so the next call dials afresh.
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
		resp, err = client.CreateCertificate(ctx, req)
		if err == nil {
			c.cfg.mark(traceAnswer)
			return resp.GetCertChain(), nil
		}
		if attempt >= c.cfg.CAAttempts || !retryable(err) || ctx.Err() != nil {
			break
		}
		c.met.retries.Inc()
		wait := backoff/2 + rand.N(backoff)
		backoff *= 2
		t := c.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
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

// caWindow is the CA connection's flow-control window, stream and connection: HTTP/2's default.
const caWindow = 65535

func (c *caClient) connection() (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		return c.conn, nil
	}
	ic, err := c.istiodConfig()
	if err != nil {
		return nil, err
	}
	// Static flow-control windows: no BDP ping follows each answer (gRPC's dynamic windows send
	// one when data arrives after a quiet spell), whose write over TLS and acknowledgement would
	// otherwise compete for the CPU with the rotation's path to Envoy. CA messages are a few KB,
	// far below the 64 KB windows.
	conn, err := istiod.Dial(ic, grpc.WithStaticStreamWindowSize(caWindow), grpc.WithStaticConnWindowSize(caWindow))
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

// istiodConfig is how the CA is reached (internal/istiod: the plaintext rule, roots re-read when
// they change, the token per call, ClusterID and CA_HEADER_* metadata), with the PROV_CERT client
// certificate loaded per handshake when present.
func (c *caClient) istiodConfig() (istiod.Config, error) {
	ic := istiod.Config{
		Address:          c.cfg.CAAddr,
		RootCAFile:       c.cfg.CARootPath,
		ServerName:       istiod.ServerName(c.cfg.CAAddr, c.cfg.IstiodSAN),
		TokenFile:        c.cfg.TokenPath,
		ClusterID:        c.cfg.ClusterID,
		Metadata:         c.cfg.CAHeaders,
		Plaintext:        istiod.CAPlaintext(c.cfg.CAAddr),
		CompliancePolicy: c.cfg.CompliancePolicy,
	}
	switch {
	case ic.IsPlaintext():
		return ic, nil
	case c.cfg.CARootPath == "":
		return ic, errors.New("CA root certificate path is empty and the CA is not plaintext")
	case c.cfg.CARootPath == SystemRoots:
		ic.RootCAFile = "" // istiod: the system roots
	}
	if dir := c.cfg.ProvCertDir; dir != "" {
		ic.ClientCertificate = istiod.FileClientCertificate(filepath.Join(dir, "cert-chain.pem"), filepath.Join(dir, "key.pem"), c.cfg.Clock.Now)
	}
	return ic, nil
}
