package bootstrap

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// NodeType is the first field of the node id.
type NodeType string

// Node types Istio knows (pkg/model/proxy.go NodeType and IsApplicationNodeType, 1.30.3); Istiod
// keys behaviour on them. The one list: pilot-agent's proxy and bootstrap commands accept these.
const (
	Sidecar      NodeType = "sidecar"
	Router       NodeType = "router"
	Waypoint     NodeType = "waypoint"
	Ztunnel      NodeType = "ztunnel"
	AgentGateway NodeType = "agentgateway"
)

// NodeTypes lists every node type, in Istio's order.
var NodeTypes = []NodeType{Sidecar, Router, Waypoint, Ztunnel, AgentGateway}

// Valid says whether t is a node type Istio knows.
func (t NodeType) Valid() bool {
	for _, k := range NodeTypes {
		if t == k {
			return true
		}
	}
	return false
}

// Resolver looks up a host name (*net.Resolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Istio's fixed paths and ports (relative paths resolve against the agent's working directory).
const (
	DefaultSDSSocketDir          = "./var/run/secrets/workload-spiffe-uds"
	DefaultSocketFile            = "socket"
	DefaultCredentialFilesSocket = "./var/run/secrets/credential-uds/files-socket"
	DefaultCredentialSocket      = "./var/run/secrets/credential-uds/socket"
	DefaultEnvoyStatusPort       = 15021
	DefaultEnvoyPrometheusPort   = 15090
	DefaultLabelsFile            = "./etc/istio/pod/labels"
	DefaultAnnotationsFile       = "./etc/istio/pod/annotations"
	DefaultGRPCBootstrapPath     = "./etc/istio/proxy/grpc-bootstrap.json"
	DefaultProfilePath           = "/var/lib/istio/data/envoy.prof"
)

// Config is everything a render needs, already parsed by cmd. Start from NewConfig, which holds
// Istio's defaults for the fields whose default is not the zero value. Immutable once passed in.
type Config struct {
	NodeType       NodeType
	IPs            []string // instance IPs, first one in the node id; parsed and checked by Render
	PodName        string   // POD_NAME
	PodNamespace   string   // POD_NAMESPACE
	Domain         string   // --domain; default <ns>.svc.cluster.local
	ServiceAccount string   // SERVICE_ACCOUNT

	// ProxyConfig is the effective ProxyConfig (see proxyconfig.LoadProxyConfig). Required.
	ProxyConfig *meshapi.ProxyConfig

	// Env is the process environment (os.Environ form). The render reads ISTIO_META_*,
	// ISTIO_METAJSON_* and DNS_PROXY_ADDR from it, and nothing else.
	Env []string

	LabelsFile      string // downward-API labels; "" skips
	AnnotationsFile string // downward-API annotations; "" skips

	// XDSSocket is the agent's xDS socket; default <configPath>/XDS.
	XDSSocket string
	// WorkloadIdentitySocketFile is the SDS socket's file name under DefaultSDSSocketDir.
	WorkloadIdentitySocketFile string

	EnvoyStatusPort              int // ENVOY_STATUS_PORT
	EnvoyPrometheusPort          int // ENVOY_PROMETHEUS_PORT
	EnvoySecureMetricsPort       int // ENVOY_SECURE_METRICS_PORT, 0 = off
	EnvoySecureMergedMetricsPort int // ENVOY_SECURE_MERGED_METRICS_PORT, 0 = off
	STSPort                      int // --stsPort, 0 = off

	Delta                       bool  // ISTIO_DELTA_XDS: ADS over DELTA_GRPC
	DualStack                   bool  // ISTIO_DUAL_STACK
	MetadataDiscovery           *bool // PEER_METADATA_DISCOVERY; nil = from ISTIO_META_ENABLE_HBONE
	ExitOnZeroActiveConnections bool
	EnvoySkipDeprecatedLogs     bool
	StatusPortProxyProtocol     bool   // ENVOY_STATUS_PORT_ENABLE_PROXY_PROTOCOL
	LogAsJSON                   bool   // --log_as_json
	FIPS                        bool   // COMPLIANCE_POLICY is fips-140-2 (google_grpc limited to TLS 1.2)
	OutlierLogPath              string // --outlierLogPath
	IstioVersion                string // build version unless ISTIO_META_ISTIO_VERSION says otherwise
	CredentialSocketExists      bool   // a healthy ./var/run/secrets/credential-uds/socket exists
	FileCredential              bool   // the agent serves only file-mounted certificates

	// KeepFragmentInPath is HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED=false: Istio then sets
	// the runtime flag http_strip_fragment_from_path_unsafe_if_disabled to "false".
	KeepFragmentInPath bool

	// Resolver resolves a statsd host name (Envoy wants an IP); nil uses net.DefaultResolver,
	// bounded by ResolveTimeout [15s, as Istio]. A name that does not resolve leaves statsd out,
	// with a warning (ResolveStatsdAddress).
	Resolver       Resolver
	ResolveTimeout time.Duration

	// Platform facts (never probed here; cmd decides whether to probe).
	PlatformMetadata map[string]string
	PlatformLocality string // region/zone/subzone, used when no locality label is set

	Logger *slog.Logger // nil discards
}

// NewConfig returns a Config holding Istio's defaults.
func NewConfig() Config {
	return Config{
		NodeType:                   Sidecar,
		WorkloadIdentitySocketFile: DefaultSocketFile,
		EnvoyStatusPort:            DefaultEnvoyStatusPort,
		EnvoyPrometheusPort:        DefaultEnvoyPrometheusPort,
		Delta:                      true,
		EnvoySkipDeprecatedLogs:    true,
		LabelsFile:                 DefaultLabelsFile,
		AnnotationsFile:            DefaultAnnotationsFile,
	}
}

func (c *Config) domain() string {
	if c.Domain != "" {
		return c.Domain
	}
	return c.PodNamespace + ".svc.cluster.local"
}

func (c *Config) xdsSocket() string {
	if c.XDSSocket != "" {
		return c.XDSSocket
	}
	return c.ProxyConfig.GetConfigPath() + "/XDS"
}

func (c *Config) sdsSocket() string {
	f := c.WorkloadIdentitySocketFile
	if f == "" {
		f = DefaultSocketFile
	}
	return DefaultSDSSocketDir + "/" + f
}
