package options

import (
	"fmt"
	"io"
	"strings"

	"github.com/wingman-mesh/wingman/transport/istiod"
)

// Var documents one environment variable for --help.
type Var struct {
	Name, Default, Help string
}

// Group is a titled list of variables.
type Group struct {
	Title string
	Vars  []Var
}

// Documented lists every variable Parse reads, for --help. A test keeps it complete.
var Documented = []Group{
	{"Identity and control plane", []Var{
		{"POD_NAME", "", "pod name; node ID <type>~<ip>~<POD_NAME>.<POD_NAMESPACE>~<domain>"},
		{"POD_NAMESPACE", "", "pod namespace; default DNS domain <ns>.svc.cluster.local"},
		{"INSTANCE_IP", "", "pod IP, first in the node's IP list"},
		{"SERVICE_ACCOUNT", "", "service account"},
		{"HOST_IP", "", "node IP substituted for $(HOST_IP) in ISTIO_BOOTSTRAP_OVERRIDE and tracer addresses"},
		{"PROXY_CONFIG", "", "ProxyConfig (YAML or JSON) merged over the mesh file's defaultConfig; unknown fields are skipped with a warning naming them"},
		{"ISTIO_META_CLUSTER_ID", "", "cluster ID, sent as ClusterID metadata to the xDS server and CA"},
		{"CA_ADDR", "discoveryAddress", "certificate authority address (a googleapis.com address, which selects GoogleCA in Istio, is refused at start)"},
		{"CA_PROVIDER", "Citadel", "Citadel (GoogleCA and GkeWorkloadCertificate are refused at start: not supported yet)"},
		{"TRUST_DOMAIN", "cluster.local", "SPIFFE trust domain"},
		{"PILOT_CERT_PROVIDER", "istiod", "istiod, kubernetes, k8s.io/<signer>, custom or none: picks the xDS root"},
		{"JWT_POLICY", "third-party-jwt", "third-party-jwt or first-party-jwt; both read ./var/run/secrets/tokens/istio-token (Istio makes no difference either)"},
		{"XDS_ROOT_CA", "", "root certificate file for the xDS server, or SYSTEM"},
		{"CA_ROOT_CA", "", "root certificate file for the CA, or SYSTEM"},
		{"ISTIOD_SAN", "", "TLS server name expected of istiod and the CA"},
		{"XDS_AUTH_PROVIDER", "", "accepted and ignored (Istio's agent ignores it too)"},
		{"XDS_HEADER_*", "", "XDS_HEADER_<NAME>=v adds gRPC metadata <NAME>: v to xDS calls"},
		{"CA_HEADER_*", "", "CA_HEADER_<NAME>=v adds gRPC metadata <NAME>: v to CA calls"},
		{"TOKEN_AUDIENCES", "istio-ca", "accepted and ignored: read by istiod only, as with Istio's agent"},
		{"KUBERNETES_SERVICE_HOST", "", "when set, OUTPUT_CERTS files are 0644 instead of 0600"},
	}},
	{"Certificates", []Var{
		{"OUTPUT_CERTS", "", "directory the workload certificate is also written to"},
		{"PROV_CERT", "", "directory of provisioned certificates used to authenticate to the CA"},
		{"FILE_MOUNTED_CERTS", "false", "use certificates mounted as files (conflicts with PROV_CERT)"},
		{"SECRET_TTL", "24h", "requested certificate lifetime"},
		{"SECRET_GRACE_PERIOD_RATIO", "0.5", "fraction of the lifetime left when rotating (0-1)"},
		{"SECRET_GRACE_PERIOD_RATIO_JITTER", "0.01", "jitter on the grace period ratio (0-1)"},
		{"WORKLOAD_RSA_KEY_SIZE", "2048", "RSA key size"},
		{"PKCS8_KEY", "false", "encode the private key as PKCS#8"},
		{"ECC_SIGNATURE_ALGORITHM", "", "ECDSA for EC keys"},
		{"ECC_CURVE", "P256", "P256 or P384"},
		{"FILE_DEBOUNCE_DURATION", "100ms", "debounce of certificate file changes"},
		{"CREDENTIAL_FETCHER_TYPE", "JWT", "JWT, or GoogleComputeEngine: the token file is filled with the VM's identity token from the metadata server (audience TRUST_DOMAIN), refreshed within 25 minutes of expiry"},
		{"GCE_METADATA_HOST", "169.254.169.254", "GCE metadata server host[:port]: CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine and platform metadata on GCP"},
		{"CREDENTIAL_IDENTITY_PROVIDER", "GoogleComputeEngine", "accepted; Istio's agent uses it only for the STS token exchange, which it no longer serves"},
		{"ISTIO_META_CERT_SIGNER", "", "signer requested in the CSR"},
		{"WORKLOAD_IDENTITY_SOCKET_FILE", "socket", "SDS socket file name (a bare name)"},
		{"PROXY_CONFIG_XDS_AGENT", "false", "subscribe to ProxyConfig over xDS (PCDS); its ca_certificates_pem is merged into ROOTCA"},
		{"PILOT_ENABLE_CA_CRL", "true", "serve the plugged-in CA's CRL (./var/run/secrets/istio/crl/ca-crl.pem, when present) in ROOTCA and file-root secrets, pushed again when it changes"},
		{"COMPLIANCE_POLICY", "", strings.Join(istiod.CompliancePolicies(), ", ") + ": restricts the agent's own TLS to Istiod and the CA, and Envoy's, as Istio does"},
	}},
	{"Envoy and lifecycle", []Var{
		{"ENVOY_STATUS_PORT", "15021", "Envoy's health listener port"},
		{"ENVOY_PROMETHEUS_PORT", "15090", "Envoy's Prometheus listener port"},
		{"ENVOY_SECURE_METRICS_PORT", "0", "Envoy's secure metrics port (0: none)"},
		{"ENVOY_SECURE_MERGED_METRICS_PORT", "0", "secure merged metrics port (0: none)"},
		{"MINIMUM_DRAIN_DURATION", "5s", "with EXIT_ON_ZERO_ACTIVE_CONNECTIONS: drain at least this long"},
		{"EXIT_ON_ZERO_ACTIVE_CONNECTIONS", "false", "on SIGTERM, stop Envoy once its active connections reach zero"},
		{"WINGMAN_MAXIMUM_DRAIN_DURATION", "5m", "Wingman only: upper bound of the zero-connections drain"},
		{"GOMEMLIMIT", "", "the Go runtime's soft memory limit; when unset, AUTOMEMLIMIT x the cgroup memory limit"},
		{"AUTOMEMLIMIT", "0.9", "share of the cgroup memory limit used as GOMEMLIMIT, or off"},
		{"WINGMAN_XDS_CLOSE_ON_UPSTREAM_LOSS", "false", "Wingman only: close Envoy's xDS stream when Istiod's goes away (Istio's behaviour) instead of reconnecting and replaying"},
		{"WINGMAN_XDS_MAX_MESSAGE_BYTES", "67108864", "Wingman only: largest xDS message the proxy accepts in either direction"},
		{"WINGMAN_LAST_STATE", "false", "Wingman only: keep a snapshot of what Envoy last accepted, the DNS proxy's name table and the workload certificate on the tmpfs proxy volume, and serve it at a start during an Istiod outage"},
		{"ENVOY_SKIP_DEPRECATED_LOGS", "true", "pass --skip-deprecated-logs"},
		{"DISABLE_ENVOY", "false", "run the agent without Envoy"},
		{"ISTIO_CPU_LIMIT", "0", "CPU limit; sets concurrency when ProxyConfig has none"},
		{"ISTIO_BOOTSTRAP", "", "bootstrap template path"},
		{"ISTIO_BOOTSTRAP_OVERRIDE", "", "YAML/JSON file passed to Envoy with --config-yaml"},
		{"ISTIO_ENVOY_ENABLE_CORE_DUMP", "false", "pass --enable-core-dump"},
		{"HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED", "true", "bootstrap runtime flag"},
		{"AWS_EC2_METADATA_SERVICE_ENDPOINT", "", "EC2 instance metadata service URL (platform metadata on AWS)"},
		{"ISTIO_DELTA_XDS", "true", "Envoy uses delta xDS"},
		{"ISTIO_DUAL_STACK", "false", "dual-stack listeners"},
		{"ENVOY_STATUS_PORT_ENABLE_PROXY_PROTOCOL", "false", "PROXY protocol on the Envoy status port"},
		{"PEER_METADATA_DISCOVERY", "ISTIO_META_ENABLE_HBONE", "peer metadata discovery"},
		{"ISTIO_META_ENABLE_SELF_DISCOVERY", "false", "self discovery in the bootstrap"},
		{"CLOUD_PLATFORM", "", "aws, azure, gcp or none; skips platform probing"},
		{"GCP_METADATA", "", "GCP metadata (project|number|cluster|zone)"},
		{"GCP_QUOTA_PROJECT", "", "GCP quota project"},
		{"GCP_ZONE", "", "GCP zone"},
	}},
	{"xDS proxy and gRPC", []Var{
		{"GRPC_XDS_BOOTSTRAP", "etc/istio/proxy/grpc-bootstrap.json", "gRPC xDS bootstrap file written at start"},
		{"ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION", "true", "fetch remote Wasm modules for Envoy"},
		{"WASM_INSECURE_REGISTRIES", "", "registries fetched without TLS verification (comma-separated)"},
		{"WASM_MODULE_EXPIRY", "24h", "Wasm cache entry lifetime"},
		{"WASM_PURGE_INTERVAL", "1h", "Wasm cache purge interval"},
		{"WASM_HTTP_REQUEST_TIMEOUT", "15s", "Wasm download timeout"},
		{"WASM_HTTP_REQUEST_MAX_RETRIES", "5", "Wasm download retries"},
		{"BLOCKED_CIDRS_IN_WASM_FETCH", "", "CIDRs Wasm downloads may not reach (comma-separated)"},
		{"ISTIO_WASM_MAX_BINARY_SIZE_BYTES", "268435456", "largest Wasm module fetched or decompressed"},
		{"GRPC_KEEPALIVE_INTERVAL", "30s", "gRPC keepalive interval (to istiod, the CA, and on the XDS socket)"},
		{"GRPC_KEEPALIVE_TIMEOUT", "10s", "gRPC keepalive timeout"},
		{"ISTIO_GPRC_MAXSTREAMS", "100000", "max concurrent streams per Envoy connection on the XDS socket (sic)"},
		{"ISTIO_GPRC_MAXRECVMSGSIZE", "4194304", "largest request Envoy may send on the XDS socket (sic)"},
	}},
	{"DNS", []Var{
		{"ISTIO_META_DNS_CAPTURE", "false", "serve DNS for the mesh (sidecars only)"},
		{"ISTIO_META_ENABLE_DNS_SERVER", "false", "serve DNS for any proxy type, without capture"},
		{"DNS_PROXY_ADDR", "localhost:15053", "DNS proxy listen address; :53 needs root (else localhost:15053)"},
		{"DNS_FORWARD_PARALLEL", "false", "query all upstream resolvers at once"},
		{"DNS_FORWARD_TIMEOUT", "5s", "upstream DNS timeout"},
	}},
	{"Status server", []Var{
		{"ISTIO_KUBE_APP_PROBERS", "", "rewritten application probes (JSON)"},
		{"ISTIO_PROMETHEUS_ANNOTATIONS", "", "application scrape settings (JSON)"},
		{"ISTIO_ENABLE_HTTP2_PROBING", "true", "HTTP/2 for h2c probes"},
		{"REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION", "false", "probe localhost instead of the pod IP"},
		{"ENABLE_PROBE_KEEPALIVE_CONNECTIONS", "false", "keep probe connections alive"},
		{"METRICS_LOCALHOST_ACCESS_ONLY", "false", "serve metrics to localhost only"},
		{"PILOT_AGENT_MERGE_ENVOY_STATS", "true", "merge Envoy's stats into /stats/prometheus"},
	}},
	{"Node metadata", []Var{
		{"ISTIO_META_ENABLE_HBONE", "false", "HBONE (default for PEER_METADATA_DISCOVERY)"},
		{"ISTIO_META_TLS_CLIENT_KEY", "", "with FILE_MOUNTED_CERTS refused at start (the xDS client certificate is not presented yet); otherwise ignored, as Istio"},
		{"ISTIO_META_TLS_CLIENT_CERT_CHAIN", "", "as ISTIO_META_TLS_CLIENT_KEY"},
		{"ISTIO_META_TLS_CLIENT_ROOT_CERT", "", "xDS root certificate with FILE_MOUNTED_CERTS"},
		{"ISTIO_META_*", "", "every ISTIO_META_<NAME> becomes node metadata <NAME>"},
		{"ISTIO_METAJSON_*", "", "JSON objects merged into node metadata"},
	}},
}

// WriteHelp prints Documented.
func WriteHelp(w io.Writer) {
	fmt.Fprintln(w, "\nEnvironment variables (default in brackets; docs/compat.md compares each with Istio's agent):")
	for _, g := range Documented {
		fmt.Fprintf(w, "\n  %s:\n", g.Title)
		for _, v := range g.Vars {
			def := ""
			if v.Default != "" {
				def = " [" + v.Default + "]"
			}
			fmt.Fprintf(w, "    %-48s %s%s\n", v.Name, strings.TrimSpace(v.Help), def)
		}
	}
}
