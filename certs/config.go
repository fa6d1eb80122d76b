package certs

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/wingman-mesh/wingman/internal/clock"
	"github.com/wingman-mesh/wingman/internal/metric"
)

// KeyType selects the workload key algorithm.
type KeyType int

const (
	// KeyRSA is Istio's default (WORKLOAD_RSA_KEY_SIZE bits, at least 2048).
	KeyRSA KeyType = iota
	// KeyECDSA is ECC_SIGNATURE_ALGORITHM=ECDSA (curve ECC_CURVE, P256 or P384); far cheaper.
	KeyECDSA
)

// SystemRoots is the CARootPath value that selects the operating system's root pool.
const SystemRoots = "SYSTEM"

// Config holds every setting of the workload identity part. cmd fills it from the environment
// (names in brackets); zero values take Istio's defaults, applied by withDefaults.
type Config struct {
	TrustDomain    string // [TRUST_DOMAIN] default cluster.local
	Namespace      string // [POD_NAMESPACE]
	ServiceAccount string // [SERVICE_ACCOUNT]

	KeyType    KeyType // [ECC_SIGNATURE_ALGORITHM=ECDSA] → KeyECDSA
	RSAKeySize int     // [WORKLOAD_RSA_KEY_SIZE] default 2048; smaller is raised to 2048
	ECCCurve   string  // [ECC_CURVE] P256 (default) or P384
	PKCS8      bool    // [PKCS8_KEY] encode the key as PKCS#8 "PRIVATE KEY"

	SecretTTL              time.Duration // [SECRET_TTL] default 24h
	GracePeriodRatio       float64       // [SECRET_GRACE_PERIOD_RATIO] default 0.5
	GracePeriodRatioJitter float64       // [SECRET_GRACE_PERIOD_RATIO_JITTER] default 0.01

	// CAAddr is the CA's host:port [CA_ADDR, default the discovery address]. Plaintext by
	// transport/istiod's rule (port 15010). Empty means no CA: certificates only come from files.
	CAAddr string
	// CARootPath is the PEM file of roots trusted for the CA, or SystemRoots [CA_ROOT_CA, resolved
	// by cmd with Istio's search order; see CARootSearch]. Re-read when it changes.
	CARootPath string
	// IstiodSAN overrides the TLS server name for the CA [ISTIOD_SAN]. When empty the name is the
	// host of CAAddr, with localhost mapped to istiod.istio-system.svc (see istiod.ServerName).
	IstiodSAN string
	// ProvCertDir holds key.pem and cert-chain.pem presented to the CA as a client certificate
	// [PROV_CERT]; loaded per handshake, skipped when absent.
	ProvCertDir string
	// TokenPath is the bearer token file, read on every CA call; a missing file sends no token.
	TokenPath  string            // default ./var/run/secrets/tokens/istio-token
	ClusterID  string            // [ISTIO_META_CLUSTER_ID] sent as ClusterID metadata
	CAHeaders  map[string]string // [CA_HEADER_<NAME>] sent as <NAME> metadata
	CertSigner string            // [ISTIO_META_CERT_SIGNER] sent as metadata.CertSigner

	// CompliancePolicy [COMPLIANCE_POLICY] restricts the CA connection's TLS as Istio does.
	CompliancePolicy string

	// CRLPath is the plugged-in CA's CRL file [PILOT_ENABLE_CA_CRL: DefaultCRLPath]; when it
	// exists, ROOTCA and file-root: secrets carry it, pushed again when it changes. Empty: none.
	CRLPath string

	// OutputCertsDir receives key.pem, cert-chain.pem and root-cert.pem after each new
	// certificate [OUTPUT_CERTS]; written atomically with OutputCertsMode (default 0600).
	OutputCertsDir  string
	OutputCertsMode uint32

	// FileCertDirs are directories of file-mounted workload certificates (cert-chain.pem, key.pem,
	// root-cert.pem), e.g. ./etc/certs and ./var/run/secrets/workload-spiffe-credentials. The first
	// that holds all three files (and is not OutputCertsDir) serves default and ROOTCA, watched,
	// and no CSR is ever sent.
	FileCertDirs []string
	// FileDebounce is the pause after a file event before re-reading [FILE_DEBOUNCE_DURATION, 100ms].
	FileDebounce time.Duration

	// SDSSocketPath is where Envoy's SDS is served
	// [./var/run/secrets/workload-spiffe-uds/<WORKLOAD_IDENTITY_SOCKET_FILE>].
	SDSSocketPath string
	// FilesSocketPath serves only file certificates when a healthy SDS socket already exists at
	// SDSSocketPath (SPIRE) [./var/run/secrets/credential-uds/files-socket].
	FilesSocketPath string
	// ServeOnlyFiles: another SDS server (SPIRE) owns SDSSocketPath, so only file-cert: and
	// file-root: resources are served, on FilesSocketPath, and no CSR is sent. cmd decides it
	// with ProbeSDSSocket before building the Config.
	ServeOnlyFiles bool

	// RetryInitial and RetryMax bound the backoff of certificate fetches (500ms and 60s, ×1.5,
	// ±50% jitter, as Istio); CAAttempts is the per-fetch unary retry count (5, from 100ms).
	RetryInitial time.Duration
	RetryMax     time.Duration
	CAAttempts   int

	Clock      clock.Clock      // nil → real time
	Logger     *slog.Logger     // nil → discard
	SDSLogger  *slog.Logger     // the SDS server's logs (Istio's "sds" scope); nil → Logger
	Registerer *metric.Registry // nil → metrics are kept but not exported
}

func (c Config) withDefaults() Config {
	if c.TrustDomain == "" {
		c.TrustDomain = "cluster.local"
	}
	if c.RSAKeySize < 2048 {
		c.RSAKeySize = 2048
	}
	if c.ECCCurve == "" {
		c.ECCCurve = "P256"
	}
	if c.SecretTTL <= 0 {
		c.SecretTTL = 24 * time.Hour
	}
	if c.GracePeriodRatio <= 0 || c.GracePeriodRatio >= 1 {
		c.GracePeriodRatio = 0.5
	}
	if c.GracePeriodRatioJitter < 0 {
		c.GracePeriodRatioJitter = 0
	}
	if c.TokenPath == "" {
		c.TokenPath = "./var/run/secrets/tokens/istio-token"
	}
	if c.OutputCertsMode == 0 {
		c.OutputCertsMode = 0o600
	}
	if c.FileDebounce <= 0 {
		c.FileDebounce = 100 * time.Millisecond
	}
	if c.SDSSocketPath == "" {
		c.SDSSocketPath = "./var/run/secrets/workload-spiffe-uds/socket"
	}
	if c.FilesSocketPath == "" {
		c.FilesSocketPath = "./var/run/secrets/credential-uds/files-socket"
	}
	if c.RetryInitial <= 0 {
		c.RetryInitial = 500 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 60 * time.Second
	}
	if c.CAAttempts <= 0 {
		c.CAAttempts = 5
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.ECCCurve != "P256" && c.ECCCurve != "P384" {
		errs = append(errs, fmt.Errorf("ECC curve %q: want P256 or P384", c.ECCCurve))
	}
	if c.KeyType != KeyRSA && c.KeyType != KeyECDSA {
		errs = append(errs, fmt.Errorf("key type %d: want KeyRSA or KeyECDSA", c.KeyType))
	}
	if c.CAAddr != "" {
		if _, _, err := net.SplitHostPort(c.CAAddr); err != nil {
			errs = append(errs, fmt.Errorf("CA address %q: %w", c.CAAddr, err))
		}
		if c.Namespace == "" || c.ServiceAccount == "" {
			errs = append(errs, errors.New("POD_NAMESPACE and SERVICE_ACCOUNT are required to request a certificate (the SPIFFE identity is spiffe://<trust domain>/ns/<POD_NAMESPACE>/sa/<SERVICE_ACCOUNT>)"))
		}
	}
	if c.GracePeriodRatioJitter >= c.GracePeriodRatio {
		errs = append(errs, fmt.Errorf("grace period jitter %v must be below the ratio %v", c.GracePeriodRatioJitter, c.GracePeriodRatio))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("certs: invalid config: %w", err)
	}
	return nil
}

// SpiffeID is the workload identity the CSR asks for.
func (c Config) SpiffeID() string {
	return "spiffe://" + c.TrustDomain + "/ns/" + c.Namespace + "/sa/" + c.ServiceAccount
}

// CARootSearch is the input of Istio's FindRootCAForCA, resolved by cmd via CARootPathFor.
type CARootSearch struct {
	CARootCA          string // CA_ROOT_CA: a path or SYSTEM; wins when set
	PilotCertProvider string // PILOT_CERT_PROVIDER: "custom" selects ./etc/certs/root-cert.pem
	ProvCert          string // PROV_CERT dir: <dir>/root-cert.pem
}

// CARootPathFor applies Istio's order: CA_ROOT_CA, then ./etc/certs/root-cert.pem for the custom
// provider, then <PROV_CERT>/root-cert.pem, then ./var/run/secrets/istio/root-cert.pem.
func CARootPathFor(s CARootSearch) string {
	switch {
	case s.CARootCA != "":
		return s.CARootCA
	case s.PilotCertProvider == "custom":
		return "./etc/certs/root-cert.pem"
	case s.ProvCert != "":
		return strings.TrimSuffix(s.ProvCert, "/") + "/root-cert.pem"
	default:
		return "./var/run/secrets/istio/root-cert.pem"
	}
}
