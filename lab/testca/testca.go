// Package testca is a real, in-process Istio-compatible certificate authority: a gRPC server for
// istio.v1.auth.IstioCertificateService/CreateCertificate that checks the bearer token and signs
// CSRs with crypto/x509. Tests, the demo's local control plane and the performance harness use it;
// it can be told to fail, or to answer with bad chains, to exercise the agent's error handling.
package testca

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"
)

// Mode selects how the CA answers; ModeOK signs normally, the others fail on purpose.
type Mode int32

const (
	ModeOK          Mode = iota // sign and return leaf + root
	ModeUnavailable             // fail the RPC with codes.Unavailable
	ModeGarbage                 // return a chain of non-PEM text
	ModeOneElement              // return only the leaf
	ModeWrongSAN                // sign a leaf for another identity
	ModeWrongKey                // sign a leaf for a key other than the CSR's
	ModeExpired                 // sign a leaf that has already expired
	ModeUntrusted               // sign with a key that the returned root did not certify
)

// Config configures a CA. Zero values take the documented defaults.
type Config struct {
	// Token is the bearer token callers must present; empty accepts any caller.
	Token string
	// TTL caps the validity asked for in the request (default 24h); a request for 0 gets TTL.
	TTL time.Duration
	// Clock gives the signing time (default time.Now); share the agent's fake clock in tests.
	Clock func() time.Time
	// Logger receives one line per failed request (nil → discard).
	Logger *slog.Logger
	// TLS makes Serve use TLS with a serving certificate for ServerName (verify it with
	// ServingRootPEM); otherwise Serve is plaintext, as Istiod's :15010.
	TLS bool
}

// ServerName is the DNS name in the CA's serving certificate: the name the agent expects for
// an Istiod reached as localhost.
const ServerName = "istiod.istio-system.svc"

// CA is the certificate authority. Methods are safe for concurrent use.
type CA struct {
	cfg      Config                 // immutable after New
	mode     atomic.Int32           // current Mode
	reqs     atomic.Uint64          // CreateCertificate calls received
	answered atomic.Pointer[func()] // OnAnswer's hook
	mu       sync.Mutex             // guards root, rootKey, rootPEM, lastMD, serial
	root     *x509.Certificate      // guarded by mu
	key      crypto.Signer          // guarded by mu
	pem      []byte                 // guarded by mu: root in PEM
	md       metadata.MD            // guarded by mu: metadata of the last request
	csrMeta  map[string]string      // guarded by mu: string fields of the last request's Metadata
	sn       int64                  // guarded by mu: last serial number issued

	serving     tls.Certificate // immutable after New: TLS serving certificate
	servingRoot []byte          // immutable after New: PEM root that signed serving

	pb.UnimplementedIstioCertificateServiceServer
}

var _ pb.IstioCertificateServiceServer = (*CA)(nil)

// New creates a CA with a fresh ECDSA P-256 root.
func New(cfg Config) (*CA, error) {
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ca := &CA{cfg: cfg}
	if err := ca.RotateRoot(); err != nil {
		return nil, err
	}
	if err := ca.makeServing(); err != nil {
		return nil, err
	}
	return ca, nil
}

// makeServing issues the TLS serving certificate from the first root, valid in real time
// (TLS handshakes check the wall clock, not Config.Clock).
func (ca *CA) makeServing() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("testca: serving key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1 << 40),
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{ServerName},
	}
	ca.mu.Lock()
	parent, signer, rootPEM := ca.root, ca.key, ca.pem
	ca.mu.Unlock()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return fmt.Errorf("testca: serving certificate: %w", err)
	}
	ca.serving = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	ca.servingRoot = rootPEM
	return nil
}

// ServingRootPEM is the root that verifies the TLS serving certificate (the first root; it does
// not change with RotateRoot).
func (ca *CA) ServingRootPEM() []byte { return append([]byte(nil), ca.servingRoot...) }

// RotateRoot replaces the root key and certificate; later certificates chain to the new root.
func (ca *CA) RotateRoot() error {
	key, root, rootPEM, err := newRoot(ca.cfg.Clock())
	if err != nil {
		return err
	}
	ca.mu.Lock()
	ca.key, ca.root, ca.pem = key, root, rootPEM
	ca.mu.Unlock()
	return nil
}

// RootPEM returns the current root certificate in PEM.
func (ca *CA) RootPEM() []byte {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return append([]byte(nil), ca.pem...)
}

// SetMode changes how the CA answers from the next request on.
func (ca *CA) SetMode(m Mode) { ca.mode.Store(int32(m)) }

// Requests returns how many CreateCertificate calls the CA has received.
func (ca *CA) Requests() uint64 { return ca.reqs.Load() }

// LastMetadata returns a copy of the gRPC metadata of the last request.
func (ca *CA) LastMetadata() metadata.MD {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.md.Copy()
}

// LastRequestMetadata returns the string fields of the last request's Metadata (Istio's agent
// sends CertSigner there).
func (ca *CA) LastRequestMetadata() map[string]string {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return maps.Clone(ca.csrMeta)
}

// Register adds the CA's service to s.
func (ca *CA) Register(s grpc.ServiceRegistrar) { pb.RegisterIstioCertificateServiceServer(s, ca) }

// Serve serves the CA over plaintext gRPC on lis until ctx is done, then stops the server and
// returns nil; lis is closed on return.
func (ca *CA) Serve(ctx context.Context, lis net.Listener) error {
	var opts []grpc.ServerOption
	if ca.cfg.TLS {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{ca.serving}, MinVersion: tls.VersionTLS12,
			ClientAuth: tls.RequestClientCert,
		})))
	}
	srv := grpc.NewServer(opts...)
	ca.Register(srv)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		srv.Stop()
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("testca: serve on %s: %w", lis.Addr(), err)
	}
}

// CreateCertificate signs the request's CSR for the identity it names.
func (ca *CA) CreateCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	ca.reqs.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	csrMeta := map[string]string{}
	for k, v := range req.GetMetadata().GetFields() {
		csrMeta[k] = v.GetStringValue()
	}
	ca.mu.Lock()
	ca.md = md.Copy()
	ca.csrMeta = csrMeta
	ca.mu.Unlock()
	resp, err := ca.sign(md, req)
	if err != nil {
		ca.cfg.Logger.Info("testca: request refused", "err", err)
	} else if f := ca.answered.Load(); f != nil {
		(*f)()
	}
	return resp, err
}

// OnAnswer sets f (nil: none) to be called each time the CA answers with a chain, as its handler
// returns it to gRPC: benchmarks time what a client does from the CA's answer on.
func (ca *CA) OnAnswer(f func()) {
	if f == nil {
		ca.answered.Store(nil)
		return
	}
	ca.answered.Store(&f)
}

func (ca *CA) sign(md metadata.MD, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	if ca.cfg.Token != "" {
		auth := md.Get("authorization")
		if len(auth) != 1 || auth[0] != "Bearer "+ca.cfg.Token {
			return nil, status.Error(codes.Unauthenticated, "testca: missing or wrong bearer token")
		}
	}
	mode := Mode(ca.mode.Load())
	switch mode {
	case ModeUnavailable:
		return nil, status.Error(codes.Unavailable, "testca: unavailable on purpose")
	case ModeGarbage:
		return &pb.IstioCertificateResponse{CertChain: []string{"not a certificate", "nor this"}}, nil
	}
	block, _ := pem.Decode([]byte(req.GetCsr()))
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, status.Error(codes.InvalidArgument, "testca: csr is not a PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "testca: parse csr: %v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "testca: csr signature: %v", err)
	}
	if len(csr.URIs) != 1 || csr.URIs[0].Scheme != "spiffe" {
		return nil, status.Error(codes.InvalidArgument, "testca: csr must carry exactly one spiffe URI SAN")
	}
	ttl := time.Duration(req.GetValidityDuration()) * time.Second
	if ttl <= 0 || ttl > ca.cfg.TTL {
		ttl = ca.cfg.TTL
	}
	now := ca.cfg.Clock()
	notBefore, notAfter := now, now.Add(ttl)
	uris := csr.URIs
	pub := csr.PublicKey
	ca.mu.Lock()
	signer, parent, rootPEM := ca.key, ca.root, ca.pem
	ca.sn++
	serial := big.NewInt(ca.sn)
	ca.mu.Unlock()
	switch mode {
	case ModeWrongSAN:
		uris = []*url.URL{{Scheme: "spiffe", Host: "evil.example", Path: "/ns/other/sa/other"}}
	case ModeWrongKey:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "testca: key: %v", err)
		}
		pub = k.Public()
	case ModeExpired:
		notBefore, notAfter = now.Add(-2*ttl), now.Add(-ttl)
	case ModeUntrusted:
		// An impostor key posing as the root: same name, another key.
		k, _, _, err := newRoot(now)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "testca: key: %v", err)
		}
		impostor := *parent
		impostor.PublicKey = k.Public()
		parent, signer = &impostor, k
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		URIs:                  uris,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "testca: sign: %v", err)
	}
	leaf := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	if mode == ModeOneElement {
		return &pb.IstioCertificateResponse{CertChain: []string{leaf}}, nil
	}
	return &pb.IstioCertificateResponse{CertChain: []string{leaf, string(rootPEM)}}, nil
}

// SpiffeID returns the identity a CSR made for these names carries.
func SpiffeID(trustDomain, namespace, serviceAccount string) string {
	return "spiffe://" + trustDomain + "/ns/" + namespace + "/sa/" + serviceAccount
}

func newRoot(now time.Time) (crypto.Signer, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("testca: root key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("testca: root serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"cluster.local"}, CommonName: "wingman test root " + serial.String()},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("testca: root: %w", err)
	}
	root, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("testca: parse root: %w", err)
	}
	return key, root, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
