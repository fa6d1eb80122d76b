package certs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/transport/h2grpc"
	"github.com/wingman-mesh/wingman/transport/istiod"
)

// caMethod is the Istio CA's one method (istio.io/api security/v1alpha1/ca.proto: package
// istio.v1.auth, service IstioCertificateService, rpc CreateCertificate).
const caMethod = "/istio.v1.auth.IstioCertificateService/CreateCertificate"

// caClient calls istio.v1.auth.IstioCertificateService/CreateCertificate over transport/h2grpc:
// a stream with one request, one response and the trailers. cfg is immutable after newCAClient;
// client is guarded by mu.
type caClient struct {
	cfg            *Config
	met            *metrics
	connectTimeout time.Duration // bounds making a connection; immutable after newCAClient

	warming sync.WaitGroup // the warm-up dial (warm); waited for by close

	mu     sync.Mutex
	client *h2grpc.Client // guarded by mu; nil until first use and after a failed sign
}

func newCAClient(cfg *Config, met *metrics) *caClient {
	return &caClient{cfg: cfg, met: met, connectTimeout: connectTimeout}
}

// sign sends csrPEM and returns the raw cert_chain. Transient failures are retried up to
// cfg.CAAttempts times with jittered exponential backoff from 100ms; after a failed sign the
// connection is dropped so the next call dials afresh. ctx bounds the whole sign, and its
// deadline goes to the CA as grpc-timeout.
func (c *caClient) sign(ctx context.Context, csrPEM []byte) ([]string, error) {
	client, err := c.connection()
	if err != nil {
		return nil, err
	}
	req := appendCARequest(nil, csrPEM, int64(c.cfg.SecretTTL/time.Second), c.cfg.CertSigner)
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		var chain []string
		chain, err = c.call(ctx, client, req)
		if err == nil {
			return chain, nil
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
	c.reset(client)
	return nil, fmt.Errorf("CreateCertificate at %s: %w", c.cfg.CAAddr, err)
}

// call makes one CreateCertificate call, on the current connection or a new one made within
// connectTimeout. A response that does not decode is Internal, as grpc-go reports a message it
// cannot unmarshal (and so retried as before).
func (c *caClient) call(ctx context.Context, client *h2grpc.Client, req []byte) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	err := client.Connect(cctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Unavailable, "connect to the CA: %s", status.Convert(err).Message())
	}
	resp, err := client.Unary(ctx, caMethod, req)
	if err != nil {
		return nil, err
	}
	chain, err := parseCAResponse(resp)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to unmarshal the CA response: %v", err)
	}
	return chain, nil
}

// connectTimeout bounds making the connection to the CA (TCP and TLS), as grpc-go's minimum
// connect timeout (20 s) bounded it before: a CA that accepts and never completes the
// handshake fails the attempt with Unavailable, which is retried, instead of holding the
// rotation (sign's context has no deadline). It bounds the warm-up dial too.
const connectTimeout = 20 * time.Second

// warm dials the CA now (name resolution, TCP, TLS) on a goroutine that close waits for, so that
// the first CSR, still being made, finds the connection up. Errors are left to sign, which
// reports them.
func (c *caClient) warm(ctx context.Context) {
	client, err := c.connection()
	if err != nil {
		return
	}
	c.warming.Add(1)
	go func() {
		defer c.warming.Done()
		wctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
		defer cancel()
		_ = client.Connect(wctx)
	}()
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted,
		codes.Internal, codes.Unavailable:
		return true
	}
	return false
}

// caWindow is the CA connection's flow-control window, stream and connection: HTTP/2's default
// rounded up to the smallest window h2grpc takes (64 KiB).
const caWindow = 64 << 10

func (c *caClient) connection() (*h2grpc.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		return c.client, nil
	}
	ic, err := c.istiodConfig()
	if err != nil {
		return nil, err
	}
	tc, err := istiod.TLSConfig(ic) // reads the roots now: unreadable roots fail at once
	if err != nil {
		return nil, fmt.Errorf("dial CA %s: %w", c.cfg.CAAddr, err)
	}
	// Static flow-control windows, as before on grpc-go (h2grpc has no other kind): no BDP
	// ping follows each answer. CA messages are a few KB, far below the 64 KB windows.
	client, err := h2grpc.NewClient(h2grpc.ClientConfig{
		Address:          ic.Address,
		TLS:              tc,
		Header:           istiod.StreamHeader(ic),
		StreamWindow:     caWindow,
		ConnWindow:       caWindow,
		KeepaliveTime:    ic.KeepaliveTime,
		KeepaliveTimeout: ic.KeepaliveTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("dial CA %s: %w", c.cfg.CAAddr, err)
	}
	c.client = client
	return client, nil
}

// reset drops client if it is still the current one and closes it.
func (c *caClient) reset(client *h2grpc.Client) {
	c.mu.Lock()
	if c.client == client {
		c.client = nil
	}
	c.mu.Unlock()
	_ = client.Close()
}

// close waits for the warm-up dial and closes the connection. The warm-up ends with the context
// warm was given (Manager.Run's, done before Run calls close) or its timeout.
func (c *caClient) close() {
	c.warming.Wait()
	c.mu.Lock()
	client := c.client
	c.client = nil
	c.mu.Unlock()
	if client != nil {
		_ = client.Close()
	}
}

// istiodConfig is how the CA is reached (transport/istiod: the plaintext rule, roots re-read when
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
