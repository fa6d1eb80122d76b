// Package options holds the agent's environment: every variable Istio's agent reads (spec §1.5),
// parsed once at start into one typed, immutable Env. A bad value fails the start with an error
// naming the variable. Nothing outside cmd/pilot-agent reads the environment.
package options

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	envlist "github.com/wingman-mesh/wingman/internal/environ"
	"github.com/wingman-mesh/wingman/transport/istiod"
)

// Env is the parsed environment. Immutable after Parse.
type Env struct {
	// Identity and control plane.
	PodName, PodNamespace string
	InstanceIP            netip.Addr // INSTANCE_IP; invalid when unset
	ServiceAccount        string
	HostIP                string // HOST_IP, for $(HOST_IP) substitution; validated as an IP when set
	ProxyConfig           string // PROXY_CONFIG (YAML/JSON ProxyConfig, parsed by the bootstrap layering)
	ClusterID             string // ISTIO_META_CLUSTER_ID
	CAAddr                string // CA_ADDR; "" → discoveryAddress
	CAProvider            string
	TrustDomain           string
	PilotCertProvider     string
	JWTPolicy             string
	XDSRootCA, CARootCA   string
	IstiodSAN             string
	XDSAuthProvider       string
	XDSHeaders, CAHeaders map[string]string // XDS_HEADER_<NAME>, CA_HEADER_<NAME> → <NAME>
	TokenAudiences        []string
	KubernetesServiceHost string

	// Certificates.
	OutputCerts, ProvCert        string
	FileMountedCerts             bool
	SecretTTL                    time.Duration
	SecretGracePeriodRatio       float64
	SecretGracePeriodRatioJitter float64
	WorkloadRSAKeySize           int
	PKCS8Key                     bool
	ECCSignatureAlgorithm        string
	ECCCurve                     string
	FileDebounceDuration         time.Duration
	CredentialFetcherType        string
	CredentialIdentityProvider   string
	GCEMetadataHost              string // GCE_METADATA_HOST: the GCE token fetcher and GCP platform metadata
	CertSigner                   string // ISTIO_META_CERT_SIGNER
	WorkloadIdentitySocketFile   string
	ProxyConfigXDSAgent          bool
	EnableCACRL                  bool
	CompliancePolicy             string

	// Envoy and lifecycle.
	EnvoyStatusPort              int
	EnvoyPrometheusPort          int
	EnvoySecureMetricsPort       int
	EnvoySecureMergedMetricsPort int
	MinimumDrainDuration         time.Duration
	ExitOnZeroActiveConnections  bool
	MaximumDrainDuration         time.Duration // WINGMAN_MAXIMUM_DRAIN_DURATION (Wingman only)
	MemLimitRatio                float64       // AUTOMEMLIMIT; 0 when GOMEMLIMIT is set or AUTOMEMLIMIT=off
	XDSCloseOnUpstreamLoss       bool          // WINGMAN_XDS_CLOSE_ON_UPSTREAM_LOSS (Wingman only)
	XDSMaxMessageBytes           int           // WINGMAN_XDS_MAX_MESSAGE_BYTES (Wingman only)
	LastState                    bool          // WINGMAN_LAST_STATE (Wingman only; laststate/)
	EnvoySkipDeprecatedLogs      bool
	DisableEnvoy                 bool
	CPULimit                     int
	BootstrapTemplate            string // ISTIO_BOOTSTRAP
	BootstrapOverride            string // ISTIO_BOOTSTRAP_OVERRIDE
	EnableCoreDump               bool
	HTTPStripFragmentFromPath    bool
	DeltaXDS                     bool
	DualStack                    bool
	StatusPortProxyProtocol      bool
	PeerMetadataDiscovery        *bool // nil → derived from ISTIO_META_ENABLE_HBONE
	EnableSelfDiscovery          bool
	CloudPlatform                string // "", aws, azure, gcp, none
	GCPMetadata                  string
	AWSMetadataEndpoint          string // AWS_EC2_METADATA_SERVICE_ENDPOINT
	GCPQuotaProject              string
	GCPZone                      string

	// xDS proxy and gRPC.
	GRPCXDSBootstrap          string
	WasmRemoteLoadConversion  bool
	WasmInsecureRegistries    []string
	WasmModuleExpiry          time.Duration
	WasmPurgeInterval         time.Duration
	WasmHTTPRequestTimeout    time.Duration
	WasmHTTPRequestMaxRetries int
	BlockedCIDRsInWasmFetch   []netip.Prefix
	WasmMaxBinarySize         int
	GRPCKeepaliveInterval     time.Duration
	GRPCKeepaliveTimeout      time.Duration
	GRPCMaxStreams            int
	GRPCMaxRecvMsgSize        int

	// DNS.
	DNSCapture         bool // ISTIO_META_DNS_CAPTURE
	EnableDNSServer    bool // ISTIO_META_ENABLE_DNS_SERVER
	DNSProxyAddr       string
	DNSForwardParallel bool
	DNSForwardTimeout  time.Duration

	// Status server.
	KubeAppProbers              string // JSON, checked for syntax
	PrometheusAnnotations       string // JSON, checked for syntax
	EnableHTTP2Probing          bool
	RewriteProbeLegacyLocalhost bool
	EnableProbeKeepalive        bool
	MetricsLocalhostAccessOnly  bool
	MergeEnvoyStats             bool

	// ISTIO_META_* read by the agent itself, and all of them for node metadata.
	EnableHBONE        bool
	TLSClientKey       string
	TLSClientCertChain string
	TLSClientRootCert  string
	Meta               map[string]string // ISTIO_META_<NAME> → <NAME>
	MetaJSON           map[string]string // ISTIO_METAJSON_<NAME> → JSON text

	// Environ is the environment as given, a repeated variable at its first entry only (what
	// os.Environ returns): passed to Envoy.
	Environ []string
}

// Parse reads environ ("NAME=value" entries, as os.Environ returns) into an Env. All bad
// variables are reported together, each error naming its variable.
func Parse(environ []string) (*Env, error) {
	e, _, err := parse(environ, false)
	return e, err
}

func parse(environ []string, record bool) (*Env, map[string]bool, error) {
	environ = envlist.Unique(environ) // a repeated variable: the first entry, as os.Getenv
	p := &parser{env: envlist.Map(environ)}
	if record {
		p.seen = make(map[string]bool)
	}
	e := &Env{Environ: environ}

	e.PodName = p.str("POD_NAME", "")
	e.PodNamespace = p.str("POD_NAMESPACE", "")
	e.InstanceIP = p.ip("INSTANCE_IP")
	e.ServiceAccount = p.str("SERVICE_ACCOUNT", "")
	if a := p.ip("HOST_IP"); a.IsValid() {
		e.HostIP = a.String()
	}
	e.ProxyConfig = p.str("PROXY_CONFIG", "")
	e.ClusterID = p.str("ISTIO_META_CLUSTER_ID", "")
	e.CAAddr = p.str("CA_ADDR", "")
	e.CAProvider = p.enum("CA_PROVIDER", "Citadel", "Citadel", "GoogleCA", "GkeWorkloadCertificate")
	e.TrustDomain = p.str("TRUST_DOMAIN", "cluster.local")
	e.PilotCertProvider = p.str("PILOT_CERT_PROVIDER", "istiod")
	switch pcp := e.PilotCertProvider; {
	case pcp == "istiod", pcp == "kubernetes", pcp == "custom", pcp == "none", strings.HasPrefix(pcp, "k8s.io/"):
	default:
		p.fail("PILOT_CERT_PROVIDER", pcp, errors.New("want istiod, kubernetes, k8s.io/<signer>, custom or none"))
	}
	e.JWTPolicy = p.enum("JWT_POLICY", "third-party-jwt", "third-party-jwt", "first-party-jwt")
	e.XDSRootCA = p.str("XDS_ROOT_CA", "")
	e.CARootCA = p.str("CA_ROOT_CA", "")
	e.IstiodSAN = p.str("ISTIOD_SAN", "")
	e.XDSAuthProvider = p.str("XDS_AUTH_PROVIDER", "")
	e.XDSHeaders = p.withPrefix("XDS_HEADER_")
	e.CAHeaders = p.withPrefix("CA_HEADER_")
	e.TokenAudiences = p.list("TOKEN_AUDIENCES", []string{"istio-ca"})
	e.KubernetesServiceHost = p.str("KUBERNETES_SERVICE_HOST", "")

	e.OutputCerts = p.str("OUTPUT_CERTS", "")
	e.ProvCert = p.str("PROV_CERT", "")
	e.FileMountedCerts = p.boolean("FILE_MOUNTED_CERTS", false)
	e.SecretTTL = p.duration("SECRET_TTL", 24*time.Hour)
	e.SecretGracePeriodRatio = p.ratio("SECRET_GRACE_PERIOD_RATIO", 0.5)
	e.SecretGracePeriodRatioJitter = p.ratio("SECRET_GRACE_PERIOD_RATIO_JITTER", 0.01)
	e.WorkloadRSAKeySize = p.integer("WORKLOAD_RSA_KEY_SIZE", 2048, 1024, 16384)
	e.PKCS8Key = p.boolean("PKCS8_KEY", false)
	e.ECCSignatureAlgorithm = p.enum("ECC_SIGNATURE_ALGORITHM", "", "ECDSA")
	e.ECCCurve = p.enum("ECC_CURVE", "P256", "P256", "P384")
	e.FileDebounceDuration = p.duration("FILE_DEBOUNCE_DURATION", 100*time.Millisecond)
	e.CredentialFetcherType = p.enum("CREDENTIAL_FETCHER_TYPE", "JWT", "JWT", "GoogleComputeEngine")
	e.CredentialIdentityProvider = p.str("CREDENTIAL_IDENTITY_PROVIDER", "GoogleComputeEngine")
	e.GCEMetadataHost = p.str("GCE_METADATA_HOST", "169.254.169.254")
	e.CertSigner = p.str("ISTIO_META_CERT_SIGNER", "")
	e.WorkloadIdentitySocketFile = p.str("WORKLOAD_IDENTITY_SOCKET_FILE", "socket")
	if s := e.WorkloadIdentitySocketFile; s == "" || filepath.Base(s) != s || s == "." || s == ".." {
		p.fail("WORKLOAD_IDENTITY_SOCKET_FILE", s, errors.New("must be a bare file name, not a path"))
	}
	e.ProxyConfigXDSAgent = p.boolean("PROXY_CONFIG_XDS_AGENT", false)
	e.EnableCACRL = p.boolean("PILOT_ENABLE_CA_CRL", true)
	e.CompliancePolicy = p.enum("COMPLIANCE_POLICY", "", istiod.CompliancePolicies()...)

	e.EnvoyStatusPort = p.port("ENVOY_STATUS_PORT", 15021)
	e.EnvoyPrometheusPort = p.port("ENVOY_PROMETHEUS_PORT", 15090)
	e.EnvoySecureMetricsPort = p.port("ENVOY_SECURE_METRICS_PORT", 0)
	e.EnvoySecureMergedMetricsPort = p.port("ENVOY_SECURE_MERGED_METRICS_PORT", 0)
	e.MinimumDrainDuration = p.duration("MINIMUM_DRAIN_DURATION", 5*time.Second)
	e.ExitOnZeroActiveConnections = p.boolean("EXIT_ON_ZERO_ACTIVE_CONNECTIONS", false)
	e.MaximumDrainDuration = p.duration("WINGMAN_MAXIMUM_DRAIN_DURATION", 5*time.Minute)
	e.MemLimitRatio = p.memLimitRatio()
	e.XDSCloseOnUpstreamLoss = p.boolean("WINGMAN_XDS_CLOSE_ON_UPSTREAM_LOSS", false)
	e.XDSMaxMessageBytes = p.integer("WINGMAN_XDS_MAX_MESSAGE_BYTES", 64<<20, 1<<10, 1<<31-1)
	e.LastState = p.boolean("WINGMAN_LAST_STATE", false)
	e.EnvoySkipDeprecatedLogs = p.boolean("ENVOY_SKIP_DEPRECATED_LOGS", true)
	e.DisableEnvoy = p.boolean("DISABLE_ENVOY", false)
	e.CPULimit = p.integer("ISTIO_CPU_LIMIT", 0, 0, 1<<20)
	e.BootstrapTemplate = p.str("ISTIO_BOOTSTRAP", "")
	e.BootstrapOverride = p.str("ISTIO_BOOTSTRAP_OVERRIDE", "")
	e.EnableCoreDump = p.boolean("ISTIO_ENVOY_ENABLE_CORE_DUMP", false)
	e.HTTPStripFragmentFromPath = p.boolean("HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED", true)
	e.DeltaXDS = p.boolean("ISTIO_DELTA_XDS", true)
	e.DualStack = p.boolean("ISTIO_DUAL_STACK", false)
	e.StatusPortProxyProtocol = p.boolean("ENVOY_STATUS_PORT_ENABLE_PROXY_PROTOCOL", false)
	e.PeerMetadataDiscovery = p.optBool("PEER_METADATA_DISCOVERY")
	e.EnableSelfDiscovery = p.boolean("ISTIO_META_ENABLE_SELF_DISCOVERY", false)
	e.CloudPlatform = strings.ToLower(p.enum("CLOUD_PLATFORM", "", "aws", "azure", "gcp", "none", "AWS", "Azure", "GCP", "None"))
	e.GCPMetadata = p.str("GCP_METADATA", "")
	e.AWSMetadataEndpoint = p.str("AWS_EC2_METADATA_SERVICE_ENDPOINT", "")
	e.GCPQuotaProject = p.str("GCP_QUOTA_PROJECT", "")
	e.GCPZone = p.str("GCP_ZONE", "")

	e.GRPCXDSBootstrap = p.str("GRPC_XDS_BOOTSTRAP", "etc/istio/proxy/grpc-bootstrap.json")
	e.WasmRemoteLoadConversion = p.boolean("ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION", true)
	e.WasmInsecureRegistries = p.list("WASM_INSECURE_REGISTRIES", nil)
	e.WasmModuleExpiry = p.duration("WASM_MODULE_EXPIRY", 24*time.Hour)
	e.WasmPurgeInterval = p.duration("WASM_PURGE_INTERVAL", time.Hour)
	e.WasmHTTPRequestTimeout = p.duration("WASM_HTTP_REQUEST_TIMEOUT", 15*time.Second)
	e.WasmHTTPRequestMaxRetries = p.integer("WASM_HTTP_REQUEST_MAX_RETRIES", 5, 0, 1000)
	e.BlockedCIDRsInWasmFetch = p.prefixes("BLOCKED_CIDRS_IN_WASM_FETCH")
	e.WasmMaxBinarySize = p.integer("ISTIO_WASM_MAX_BINARY_SIZE_BYTES", 256<<20, 1, 1<<40)
	e.GRPCKeepaliveInterval = p.duration("GRPC_KEEPALIVE_INTERVAL", 30*time.Second)
	e.GRPCKeepaliveTimeout = p.duration("GRPC_KEEPALIVE_TIMEOUT", 10*time.Second)
	e.GRPCMaxStreams = p.integer("ISTIO_GPRC_MAXSTREAMS", 100000, 1, 1<<31-1)
	e.GRPCMaxRecvMsgSize = p.integer("ISTIO_GPRC_MAXRECVMSGSIZE", 4<<20, 1, 1<<31-1)

	e.DNSCapture = p.boolean("ISTIO_META_DNS_CAPTURE", false)
	e.EnableDNSServer = p.boolean("ISTIO_META_ENABLE_DNS_SERVER", false)
	e.DNSProxyAddr = p.hostPort("DNS_PROXY_ADDR", "localhost:15053")
	e.DNSForwardParallel = p.boolean("DNS_FORWARD_PARALLEL", false)
	e.DNSForwardTimeout = p.duration("DNS_FORWARD_TIMEOUT", 5*time.Second)

	e.KubeAppProbers = p.jsonText("ISTIO_KUBE_APP_PROBERS")
	e.PrometheusAnnotations = p.jsonText("ISTIO_PROMETHEUS_ANNOTATIONS")
	e.EnableHTTP2Probing = p.boolean("ISTIO_ENABLE_HTTP2_PROBING", true)
	e.RewriteProbeLegacyLocalhost = p.boolean("REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION", false)
	e.EnableProbeKeepalive = p.boolean("ENABLE_PROBE_KEEPALIVE_CONNECTIONS", false)
	e.MetricsLocalhostAccessOnly = p.boolean("METRICS_LOCALHOST_ACCESS_ONLY", false)
	e.MergeEnvoyStats = p.boolean("PILOT_AGENT_MERGE_ENVOY_STATS", true)

	e.EnableHBONE = p.boolean("ISTIO_META_ENABLE_HBONE", false)
	e.TLSClientKey = p.str("ISTIO_META_TLS_CLIENT_KEY", "")
	e.TLSClientCertChain = p.str("ISTIO_META_TLS_CLIENT_CERT_CHAIN", "")
	e.TLSClientRootCert = p.str("ISTIO_META_TLS_CLIENT_ROOT_CERT", "")
	e.Meta = p.withPrefix("ISTIO_META_")
	e.MetaJSON = p.withPrefix("ISTIO_METAJSON_")

	// Settings that conflict with each other.
	if e.FileMountedCerts && e.ProvCert != "" {
		p.errs = append(p.errs, fmt.Errorf("environment variables FILE_MOUNTED_CERTS=true and PROV_CERT=%q conflict: "+
			"file-mounted certificates cannot be combined with provisioned certificates", e.ProvCert))
	}
	if e.GRPCKeepaliveInterval > 0 && e.GRPCKeepaliveTimeout == 0 {
		p.fail("GRPC_KEEPALIVE_TIMEOUT", "0s", errors.New("must be positive when GRPC_KEEPALIVE_INTERVAL is set"))
	}
	return e, p.seen, errors.Join(p.errs...)
}
