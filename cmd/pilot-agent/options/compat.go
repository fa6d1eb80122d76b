package options

import (
	"fmt"
	"io"
	"strings"

	"github.com/wingman-mesh/wingman/transport/istiod"
)

// Status says what Wingman does with a setting Istio's agent reads.
type Status string

const (
	// Same: Wingman does what Istio's agent does; Row.Tests names tests that exercise it.
	Same Status = "same"
	// SameUntested: the code was read against Istio's and does the same, but no test exercises
	// it yet (listed so that it is visible, not hidden among the tested rows).
	SameUntested Status = "same, untested"
	// Different: Wingman behaves differently on purpose, or still differs; the note says how.
	Different Status = "different"
	// Refused: the agent fails at start (exit 2) naming the setting, because it is not
	// supported yet. The note says exactly which values are refused.
	Refused Status = "refused"
	// IgnoredByIstio: Istio's agent reads it and does nothing with it either; so does Wingman.
	IgnoredByIstio Status = "ignored by Istio too"
	// Pending: parsed and without effect in this tree; another branch of issue 15 implements
	// it (the lead updates the row when merging).
	Pending Status = "not yet (in progress)"
	// WingmanOnly: Wingman's own setting; Istio's agent has no such thing.
	WingmanOnly Status = "Wingman only"
)

// Kind is where a setting comes from.
type Kind string

const (
	KindEnv         Kind = "env"
	KindProxyConfig Kind = "ProxyConfig"
)

// CompatRow is one setting Istio's agent reads and what Wingman does with it.
type CompatRow struct {
	Name   string // variable name (as in Documented) or ProxyConfig JSON field name
	Kind   Kind
	Status Status
	Note   string   // how, or why not, and where Istio does it
	Tests  []string // test functions that exercise it (required for Same)
}

// Compat is the compatibility table: every environment variable Documented lists and every
// field of istio.io/api's ProxyConfig. A test keeps it complete, keeps docs/compat.md generated
// from it, and checks that every named test exists.
//
// How the statuses were established: Wingman's side by reading where each Env field and
// ProxyConfig getter is used (cmd/pilot-agent, bootstrap, certs, mux, dns, status, supervisor);
// Istio's side from /work/shared/spec/istio-agent.md §1.5 and istio/istio's
// pkg/istio-agent/agent.go, xds_proxy.go, security/pkg/nodeagent and pkg/bootstrap.
var Compat = []CompatRow{
	// Identity and control plane.
	{"POD_NAME", KindEnv, Same, "node ID `<type>~<ip>~<POD_NAME>.<POD_NAMESPACE>~<domain>`", []string{"TestDiscover", "TestProxyLifecycle"}},
	{"POD_NAMESPACE", KindEnv, Same, "node ID, default DNS domain, CSR identity; empty without FILE_MOUNTED_CERTS stops the start naming it (Istio fails later, at the CA)", []string{"TestDiscover", "TestProxyLifecycle", "TestEmptyIdentityNamed"}},
	{"INSTANCE_IP", KindEnv, Same, "first in the node's IP list; an IPv6 one (not link-local) makes readiness read Envoy's admin on ::1, as Istio's status server", []string{"TestDiscover", "TestProxyLifecycle", "TestReadinessProbesWhereEnvoyListens", "TestAdminLocalhost"}},
	{"SERVICE_ACCOUNT", KindEnv, Same, "SPIFFE identity in the CSR; bootstrap metadata; empty without FILE_MOUNTED_CERTS stops the start naming it and the token (Istio fails later, at the CA)", []string{"TestStartup", "TestGoldens", "TestEmptyIdentityNamed", "TestCASettingsEndToEnd"}},
	{"HOST_IP", KindEnv, Same, "substituted for `$(HOST_IP)` in tracer addresses and ISTIO_BOOTSTRAP_OVERRIDE", []string{"TestBootstrapOverrideJSON", "TestGoldens"}},
	{"PROXY_CONFIG", KindEnv, Same, "layered between the mesh file and the pod annotation, as Istio: a field a layer sets replaces the one below whole (nested messages too), proxyMetadata merged by key, five proxyHeaders fields kept when unset; an unknown field is logged with its name and skipped, as Istio", []string{"TestPrecedence", "TestProxyHeadersCorrected", "TestUnknownFieldTolerated", "TestConflictingSettings"}},
	{"ISTIO_META_CLUSTER_ID", KindEnv, Same, "`ClusterID` gRPC metadata to xDS and the CA; node metadata", []string{"TestStartup", "TestNodeReadBackAsIstiod", "TestCASettingsEndToEnd"}},
	{"CA_ADDR", KindEnv, Same, "CA address; discoveryAddress when unset", []string{"TestCASettingsEndToEnd"}},
	{"CA_PROVIDER", KindEnv, Refused, "`Citadel` works as Istio. `GoogleCA` is refused (Istio's open-source agent fails too: the provider is not registered); `GkeWorkloadCertificate` (file certificates from the GKE workload-certificate directory) is refused as not supported yet; so is a `googleapis.com` CA_ADDR, for which Istio switches to GoogleCA", []string{"TestUnsupportedSettingsRefused"}},
	{"TRUST_DOMAIN", KindEnv, Same, "SPIFFE trust domain; audience of the GCE identity token", []string{"TestStartup", "TestGCECredentialFetcher", "TestCASettingsEndToEnd"}},
	{"PILOT_CERT_PROVIDER", KindEnv, Same, "picks the root certificate that verifies istiod and the CA (Istio's FindRootCAForXDS/ForCA order); `none` without XDS_ROOT_CA or CA_ROOT_CA stops the start, as Istio", []string{"TestMissingTokenOrRoot", "TestRootFilesAsIstio"}},
	{"JWT_POLICY", KindEnv, IgnoredByIstio, "validated only: Istio treats first-party-jwt as third-party-jwt and always reads ./var/run/secrets/tokens/istio-token", nil},
	{"XDS_ROOT_CA", KindEnv, Same, "root file for istiod, or SYSTEM (Istio's FindRootCAForXDS order)", []string{"TestMissingTokenOrRoot", "TestRootFilesAsIstio"}},
	{"CA_ROOT_CA", KindEnv, Same, "root file for the CA, or SYSTEM (Istio's FindRootCAForCA order)", []string{"TestRootFilesAsIstio"}},
	{"ISTIOD_SAN", KindEnv, Same, "TLS server name expected of istiod and the CA", []string{"TestRootFilesAsIstio", "TestCASettingsEndToEnd"}},
	{"XDS_AUTH_PROVIDER", KindEnv, IgnoredByIstio, "Istio's agent reads it into its options and never uses it", nil},
	{"XDS_HEADER_*", KindEnv, Same, "each becomes gRPC metadata on the xDS stream", []string{"TestCASettingsEndToEnd"}},
	{"CA_HEADER_*", KindEnv, Same, "each becomes gRPC metadata on CA calls", []string{"TestStartup", "TestCASettingsEndToEnd"}},
	{"TOKEN_AUDIENCES", KindEnv, IgnoredByIstio, "registered in Istio's agent but read only by istiod", nil},
	{"KUBERNETES_SERVICE_HOST", KindEnv, Same, "OUTPUT_CERTS files 0644 instead of 0600", []string{"TestCASettingsEndToEnd"}},

	// Certificates.
	{"OUTPUT_CERTS", KindEnv, Same, "certificate, key and root also written to this directory", []string{"TestOutputCerts", "TestCASettingsEndToEnd"}},
	{"PROV_CERT", KindEnv, Same, "the provisioned certificate authenticates the agent to the CA, no token needed; its root-cert.pem is the root", []string{"TestProvCertAuthenticatesToCA", "TestRootFilesAsIstio", "TestConflictingSettings"}},
	{"FILE_MOUNTED_CERTS", KindEnv, Same, "certificates from files, no CA", []string{"TestFileMountedWorkloadCerts", "TestMissingTokenOrRoot"}},
	{"SECRET_TTL", KindEnv, Same, "requested certificate lifetime", []string{"TestCASettingsEndToEnd"}},
	{"SECRET_GRACE_PERIOD_RATIO", KindEnv, Same, "rotation point", []string{"TestRotationMaths", "TestRotationByFakeClock"}},
	{"SECRET_GRACE_PERIOD_RATIO_JITTER", KindEnv, Same, "jitter on the rotation point", []string{"TestRotationMaths"}},
	{"WORKLOAD_RSA_KEY_SIZE", KindEnv, Same, "", []string{"TestKeysAndCSR"}},
	{"PKCS8_KEY", KindEnv, Same, "", []string{"TestKeysAndCSR"}},
	{"ECC_SIGNATURE_ALGORITHM", KindEnv, Same, "ECDSA selects EC keys", []string{"TestKeysAndCSR"}},
	{"ECC_CURVE", KindEnv, Same, "P256 or P384", []string{"TestKeysAndCSR"}},
	{"FILE_DEBOUNCE_DURATION", KindEnv, Same, "debounce of certificate file changes", []string{"TestFileCertKubeletRotation"}},
	{"CREDENTIAL_FETCHER_TYPE", KindEnv, Same, "JWT, or GoogleComputeEngine (token from the metadata server, refreshed before expiry)", []string{"TestGCECredentialFetcher", "TestRunRefreshesBeforeExpiryAndRetries"}},
	{"GCE_METADATA_HOST", KindEnv, Same, "metadata server for CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine", []string{"TestGCECredentialFetcher", "TestFetchWritesTokenFile"}},
	{"CREDENTIAL_IDENTITY_PROVIDER", KindEnv, IgnoredByIstio, "Istio's open-source agent uses it only for the STS token exchange of vendor CA plugins, which it no longer serves", nil},
	{"ISTIO_META_CERT_SIGNER", KindEnv, Same, "`CertSigner` metadata on the CSR call", []string{"TestCASettingsEndToEnd"}},
	{"WORKLOAD_IDENTITY_SOCKET_FILE", KindEnv, Same, "a bare name; a non-default name must belong to a live SDS server (SPIRE), else the start fails, as Istio", []string{"TestCustomSDSSocketNeedsAServer", "TestProbeSDSSocket"}},
	{"PROXY_CONFIG_XDS_AGENT", KindEnv, Same, "`true` subscribes to ProxyConfig over xDS (PCDS) on Envoy's ADS stream; `ca_certificates_pem` is merged into ROOTCA (sorted, de-duplicated), as Istio's UpdateConfigTrustBundle", []string{"TestPCDSTrustBundleMergedIntoROOTCA", "TestTrustBundleFromProxyConfig"}},
	{"PILOT_ENABLE_CA_CRL", KindEnv, Different, "with `true` and the plugged-in CA's CRL at /var/run/secrets/istio/crl/ca-crl.pem, ROOTCA and file-root secrets carry it in validation_context.crl, as Istio; Wingman sends it inline and pushes again when the file changes, where Istio references the file by name", []string{"TestCRLInRootSecrets"}},
	{"COMPLIANCE_POLICY", KindEnv, Same, strings.Join(istiod.CompliancePolicies(), ", ") + ": the agent's own TLS to istiod and the CA as Istio's EnforceGoCompliance; Envoy's GRPC_SSL_CIPHER_SUITES and the google_grpc TLS 1.2 runtime flag as Istio sets them per policy", []string{"TestCompliancePolicy", "TestCompliancePolicyForEnvoy"}},

	// Envoy and lifecycle.
	{"ENVOY_STATUS_PORT", KindEnv, Same, "Envoy's health listener in the bootstrap", []string{"TestGoldens", "TestNodeReadBackAsIstiod"}},
	{"ENVOY_PROMETHEUS_PORT", KindEnv, Same, "Envoy's Prometheus listener; merged by /stats/prometheus", []string{"TestGoldens", "TestMetricsEndpoint", "TestMergeEnvoyStatsSetting"}},
	{"ENVOY_SECURE_METRICS_PORT", KindEnv, Same, "the secure (mTLS) metrics listener is rendered, as Istio's template; read from Istio 1.31 on (ignored when stamped 1.28-1.30, as those agents do)", []string{"TestTemplateParity", "TestReleaseBranches"}},
	{"ENVOY_SECURE_MERGED_METRICS_PORT", KindEnv, Same, "the secure merged metrics listener is rendered, as Istio's template; read from Istio 1.31 on (ignored when stamped 1.28-1.30, as those agents do)", []string{"TestTemplateParity", "TestReleaseBranches"}},
	{"MINIMUM_DRAIN_DURATION", KindEnv, Same, "", []string{"TestExitOnZeroActiveConnections"}},
	{"EXIT_ON_ZERO_ACTIVE_CONNECTIONS", KindEnv, Same, "", []string{"TestExitOnZeroActiveConnections", "TestGoldens"}},
	{"WINGMAN_MAXIMUM_DRAIN_DURATION", KindEnv, WingmanOnly, "upper bound of the zero-connections drain (Istio waits without bound)", []string{"TestExitOnZeroActiveConnectionsUpperBound"}},
	{"GOMEMLIMIT", KindEnv, Same, "the Go runtime applies it; AUTOMEMLIMIT is then skipped, as Istio", []string{"TestMemLimitRatio"}},
	{"AUTOMEMLIMIT", KindEnv, Same, "share of the cgroup memory limit set as GOMEMLIMIT (Istio uses automemlimit, default 0.9)", []string{"TestMemLimitRatio", "TestApplyMemoryLimit"}},
	{"WINGMAN_XDS_CLOSE_ON_UPSTREAM_LOSS", KindEnv, WingmanOnly, "`true` closes Envoy's stream when istiod's goes away, as Istio's agent always does", []string{"TestCloseOnUpstreamLoss"}},
	{"WINGMAN_XDS_MAX_MESSAGE_BYTES", KindEnv, WingmanOnly, "largest xDS message the proxy accepts", nil},
	{"WINGMAN_LAST_STATE", KindEnv, WingmanOnly, "off by default. `true` (env or proxyMetadata) keeps `./etc/istio/proxy/wingman-last-state.snap` (0600, SHA-256-checked, at most 64 MiB, rewritten on every new ACK or certificate, for the pod's life): the xDS responses Envoy and proxyless gRPC clients last ACKed, as forwarded, with versions and type URLs, the DNS proxy's last accepted NameTable as Istiod sent it, and the workload certificate, key and roots. At a start when Istiod refuses or does not answer a dial within 500 ms, a snapshot of this pod (node id, namespace, service account, trust domain) with a valid certificate verified by its roots is served until Istiod answers, which then replaces it without resetting Envoy's stream; its NameTable is given to the DNS proxy first, replaced by Istiod's next one. Security: it holds the workload key, so it is written and read only on a tmpfs inside the pod (Istio's `istio-envoy` emptyDir, medium Memory: the trust boundary of the agent's memory), refused naming the directory anywhere else, never on a node-backed volume (README, Last state)", []string{"TestLastStateRestoresWithoutIstiod", "TestLastStateRestoresNameTable", "TestLastStateOffByDefault"}},
	{"ENVOY_SKIP_DEPRECATED_LOGS", KindEnv, Same, "--skip-deprecated-logs", []string{"TestArgsMatchIstio", "TestProxyLifecycle"}},
	{"DISABLE_ENVOY", KindEnv, Same, "no Envoy and no SDS server, certificates to OUTPUT_CERTS; readiness waits for the certificate files, as Istio", []string{"TestReadinessNoEnvoyWaitsForCertificates"}},
	{"ISTIO_CPU_LIMIT", KindEnv, Same, "Envoy concurrency when ProxyConfig sets none, written into the ProxyConfig (so PROXY_CONFIG metadata) as Istio; --concurrency wins", []string{"TestConcurrencyRules", "TestProxyConfigAsIstioConstructs"}},
	{"ISTIO_BOOTSTRAP", KindEnv, Same, "custom bootstrap template", []string{"TestCustomTemplate"}},
	{"ISTIO_BOOTSTRAP_OVERRIDE", KindEnv, Same, "passed to Envoy with --config-yaml; `bootstrap` merges it as Envoy does", []string{"TestOverrideMerge", "TestBootstrapCommand"}},
	{"ISTIO_ENVOY_ENABLE_CORE_DUMP", KindEnv, Same, "--enable-core-dump", []string{"TestArgsMatchIstio"}},
	{"HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED", KindEnv, Same, "`false` sets Istio's runtime flag", []string{"TestParityFeatures"}},
	{"ISTIO_DELTA_XDS", KindEnv, Same, "DELTA_GRPC or GRPC in the bootstrap", []string{"TestGoldens"}},
	{"ISTIO_DUAL_STACK", KindEnv, Same, "dual-stack listeners in the bootstrap", []string{"TestGoldens"}},
	{"ENVOY_STATUS_PORT_ENABLE_PROXY_PROTOCOL", KindEnv, Same, "PROXY protocol on the Envoy status listener", []string{"TestGoldens"}},
	{"PEER_METADATA_DISCOVERY", KindEnv, Same, "unset: follows ISTIO_META_ENABLE_HBONE", []string{"TestNodeReadBackAsIstiod"}},
	{"ISTIO_META_ENABLE_SELF_DISCOVERY", KindEnv, Same, "defines local_cluster and local_cluster_name", []string{"TestParityFeatures"}},
	{"CLOUD_PLATFORM", KindEnv, Same, "skips platform probing; picks the platform", []string{"TestDetect"}},
	{"GCP_METADATA", KindEnv, Same, "platform metadata on GCP", []string{"TestGCPMetadata"}},
	{"GCP_QUOTA_PROJECT", KindEnv, Same, "gcp_quota_project in PLATFORM_METADATA, with GCP_METADATA only (pkg/bootstrap/platform/gcp.go)", []string{"TestGCPStaticMetadataAsIstio"}},
	{"GCP_ZONE", KindEnv, Same, "gcp_zone and the zone of the locality on GCP, with GCP_METADATA only; else the zone in resolv.conf, else the metadata server's (gcp.go)", []string{"TestGCPStaticMetadataAsIstio", "TestGCPZoneAsIstio"}},
	{"AWS_EC2_METADATA_SERVICE_ENDPOINT", KindEnv, Same, "the metadata endpoint platform detection reads on AWS (the AWS SDK's variable)", []string{"TestAWSMetadataIMDSv2"}},

	// xDS proxy and gRPC.
	{"GRPC_XDS_BOOTSTRAP", KindEnv, Same, "gRPC xDS bootstrap written at start", []string{"TestGRPCBootstrap"}},
	{"ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION", KindEnv, Same, "remote Wasm modules in ECDS are fetched, cached and rewritten to local files; `false` forwards ECDS unchanged", []string{"TestRewriteHTTPWasmToLocalFile"}},
	{"WASM_INSECURE_REGISTRIES", KindEnv, Same, "", []string{"TestInsecureRegistries"}},
	{"WASM_MODULE_EXPIRY", KindEnv, Same, "", []string{"TestExpiryAndPurge"}},
	{"WASM_PURGE_INTERVAL", KindEnv, Same, "", []string{"TestPurgeLoopRuns"}},
	{"WASM_HTTP_REQUEST_TIMEOUT", KindEnv, Same, "", []string{"TestSlowFetchTimesOut"}},
	{"WASM_HTTP_REQUEST_MAX_RETRIES", KindEnv, Different, "`0` makes one attempt where Istio makes none", []string{"TestRetriesAndFailures"}},
	{"BLOCKED_CIDRS_IN_WASM_FETCH", KindEnv, Same, "checked after DNS resolution, with link-local and cloud metadata addresses", []string{"TestBlockedAddresses"}},
	{"ISTIO_WASM_MAX_BINARY_SIZE_BYTES", KindEnv, Same, "largest Wasm module fetched or decompressed", []string{"TestSizeCapAndUnboxing"}},
	{"GRPC_KEEPALIVE_INTERVAL", KindEnv, Same, "keepalive to istiod, the CA and on the XDS socket", []string{"TestDownstreamLimits"}},
	{"GRPC_KEEPALIVE_TIMEOUT", KindEnv, Same, "", []string{"TestDownstreamLimits"}},
	{"ISTIO_GPRC_MAXSTREAMS", KindEnv, Same, "concurrent streams per Envoy connection on the XDS socket", []string{"TestDownstreamLimits"}},
	{"ISTIO_GPRC_MAXRECVMSGSIZE", KindEnv, Same, "largest message Envoy may send on the XDS socket", []string{"TestDownstreamLimits"}},

	// DNS.
	{"ISTIO_META_DNS_CAPTURE", KindEnv, Same, "starts the DNS proxy for sidecars, as Istio", []string{"TestEnabled"}},
	{"ISTIO_META_ENABLE_DNS_SERVER", KindEnv, Same, "DNS proxy without capture (Istio's DNS at gateways)", []string{"TestResolution"}},
	{"DNS_PROXY_ADDR", KindEnv, Same, "listen address; `:53` as root answers before the first name table, as Istio", []string{"TestIPv6Listener", "TestRespondBeforeSync"}},
	{"DNS_FORWARD_PARALLEL", KindEnv, Same, "", []string{"TestForwardParallel"}},
	{"DNS_FORWARD_TIMEOUT", KindEnv, Same, "", []string{"TestUpstreamFailures", "TestForwardBound"}},

	// Status server.
	{"ISTIO_KUBE_APP_PROBERS", KindEnv, Same, "rewritten application probes", []string{"TestAppProbeThroughServer", "TestParseValid", "TestProbeKeepAliveSetting"}},
	{"ISTIO_PROMETHEUS_ANNOTATIONS", KindEnv, Same, "application scrape merged into /stats/prometheus", []string{"TestParseAnnotations", "TestMergeOpenMetrics"}},
	{"ISTIO_ENABLE_HTTP2_PROBING", KindEnv, Same, "", []string{"TestHTTPSProbeUsesHTTP2"}},
	{"REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION", KindEnv, Same, "", []string{"TestLegacyLocalhostProbeDestination"}},
	{"ENABLE_PROBE_KEEPALIVE_CONNECTIONS", KindEnv, Same, "keep probe connections to the application alive (default: a new connection per probe)", []string{"TestProbeKeepAliveSetting"}},
	{"METRICS_LOCALHOST_ACCESS_ONLY", KindEnv, Same, "", []string{"TestLocalOnlyEndpointsRefuseRemoteCallers"}},
	{"PILOT_AGENT_MERGE_ENVOY_STATS", KindEnv, Same, "`false` leaves Envoy's stats out of /stats/prometheus", []string{"TestMergeEnvoyStatsSetting"}},

	// Node metadata.
	{"ISTIO_META_ENABLE_HBONE", KindEnv, Same, "node metadata; default of PEER_METADATA_DISCOVERY", []string{"TestGoldens"}},
	{"ISTIO_META_TLS_CLIENT_KEY", KindEnv, Same, "as ISTIO_META_TLS_CLIENT_CERT_CHAIN", []string{"TestFileClientCertificate"}},
	{"ISTIO_META_TLS_CLIENT_CERT_CHAIN", KindEnv, Same, "with FILE_MOUNTED_CERTS the xDS upstream presents the mounted pair (env or proxyMetadata), read per handshake", []string{"TestFileClientCertificate"}},
	{"ISTIO_META_TLS_CLIENT_ROOT_CERT", KindEnv, Same, "root for istiod with FILE_MOUNTED_CERTS (Istio reads it from proxyMetadata, which the injector also sets as environment)", []string{"TestRootFilesAsIstio"}},
	{"ISTIO_META_*", KindEnv, Same, "every `ISTIO_META_<NAME>` becomes node metadata `<NAME>` (LOAD_STATS_CONFIG_JSON, GLOBAL_DOWNSTREAM_MAX_CONNECTIONS and the `WASM_*` keys included)", []string{"TestGoldens", "TestNodeReadBackAsIstiod"}},
	{"ISTIO_METAJSON_*", KindEnv, Same, "JSON objects merged into node metadata", []string{"TestGoldens"}},

	// ProxyConfig fields, in istio.io/api's order.
	{"configPath", KindProxyConfig, Same, "bootstrap and XDS socket directory", []string{"TestProxyLifecycle"}},
	{"binaryPath", KindProxyConfig, Same, "", []string{"TestProxyLifecycle"}},
	{"serviceCluster", KindProxyConfig, Same, "Envoy's node cluster", []string{"TestGoldens"}},
	{"tracingServiceName", KindProxyConfig, Different, "names the node cluster as Istio when the pod has the service.istio.io/canonical-name label (the injector always adds it); without it, CANONICAL_NAME_ONLY gives `<app>.<namespace>` where Istio's pkg/bootstrap gives the app.kubernetes.io/name or app label alone, and app.kubernetes.io/name is never consulted (bootstrap/node.go)", nil},
	{"drainDuration", KindProxyConfig, Same, "--drain-time-s", []string{"TestProxyLifecycle", "TestArgsMatchIstio"}},
	{"discoveryAddress", KindProxyConfig, Same, "istiod's address; also the sidecar.istio.io/discoveryAddress annotation", []string{"TestPrecedence", "TestNodeReadBackAsIstiod"}},
	{"discoveryRefreshDelay", KindProxyConfig, IgnoredByIstio, "deprecated; Istio's agent never reads it", nil},
	{"zipkinAddress", KindProxyConfig, IgnoredByIstio, "deprecated; Istio's bootstrap uses tracing.zipkin.address", nil},
	{"statsdUdpAddress", KindProxyConfig, Same, "statsd sink in the bootstrap; resolved at start to ip:port (IPv4 first), or dropped with a warning when it does not resolve, as Istio", []string{"TestStatsSinksFromProxyConfig", "TestProxyConfigAsIstioConstructs", "TestUnresolvableStatsdDropped"}},
	{"envoyMetricsServiceAddress", KindProxyConfig, IgnoredByIstio, "deprecated; Istio's bootstrap uses envoyMetricsService", nil},
	{"proxyAdminPort", KindProxyConfig, Same, "", []string{"TestProxyLifecycle"}},
	{"availabilityZone", KindProxyConfig, IgnoredByIstio, "deprecated; locality comes from the platform and labels", nil},
	{"controlPlaneAuthPolicy", KindProxyConfig, Same, "NONE means plaintext to istiod, as Istio; any other value is TLS whatever the port", []string{"TestCAPlaintext"}},
	{"customConfigFile", KindProxyConfig, Same, "handed to Envoy as is, never rendered or deleted", []string{"TestCustomConfigFileUsedAsIs"}},
	{"statNameLength", KindProxyConfig, IgnoredByIstio, "validated only; Istio's bootstrap no longer passes it to Envoy", nil},
	{"concurrency", KindProxyConfig, Same, "Envoy --concurrency", []string{"TestConcurrencyRules", "TestArgsMatchIstio"}},
	{"proxyBootstrapTemplatePath", KindProxyConfig, Same, "", []string{"TestEffectiveTemplatePath"}},
	{"interceptionMode", KindProxyConfig, IgnoredByIstio, "read by the injector and istio-iptables, not by the agent (istiod gets ISTIO_META_INTERCEPTION_MODE)", nil},
	{"tracing", KindProxyConfig, Same, "tracer in the bootstrap; an unknown tracer is an error naming it (Istio drops it silently)", []string{"TestGoldens", "TestBadInputNamesSourceAndField"}},
	{"sds", KindProxyConfig, IgnoredByIstio, "deprecated; unused", nil},
	{"envoyAccessLogService", KindProxyConfig, Same, "the envoy_accesslog_service cluster is rendered", []string{"TestTemplateParity"}},
	{"envoyMetricsService", KindProxyConfig, Same, "metrics service sink and cluster in the bootstrap", []string{"TestStatsSinksFromProxyConfig"}},
	{"proxyMetadata", KindProxyConfig, Same, "`ISTIO_META_*` keys become node metadata (the environment wins)", []string{"TestGoldens"}},
	{"runtimeValues", KindProxyConfig, Same, "static runtime layer in the bootstrap", []string{"TestGoldens"}},
	{"statusPort", KindProxyConfig, Same, "the agent's status server; also status.sidecar.istio.io/port", []string{"TestPrecedence", "TestProxyLifecycle"}},
	{"extraStatTags", KindProxyConfig, Same, "", []string{"TestGoldens"}},
	{"gatewayTopology", KindProxyConfig, Same, "read by istiod from the node's PROXY_CONFIG metadata, which Wingman sends as Istio", []string{"TestNodeReadBackAsIstiod"}},
	{"terminationDrainDuration", KindProxyConfig, Same, "", []string{"TestTerminationDrainDuration", "TestSecondSignalStopsAtOnce"}},
	{"meshId", KindProxyConfig, Same, "read by istiod from the node's PROXY_CONFIG metadata", []string{"TestNodeReadBackAsIstiod"}},
	{"readinessProbe", KindProxyConfig, Same, "HTTP, TCP, gRPC or exec probe with Istio's thresholds; each change sent to istiod as HealthInformation", []string{"TestHealthInformationReachesIstiod", "TestThresholds"}},
	{"proxyStatsMatcher", KindProxyConfig, Same, "", []string{"TestGoldens"}},
	{"holdApplicationUntilProxyStarts", KindProxyConfig, IgnoredByIstio, "read by the injector (it adds `pilot-agent wait`), not by the agent", nil},
	{"caCertificatesPem", KindProxyConfig, Same, "read from PCDS responses (PROXY_CONFIG_XDS_AGENT) and merged into ROOTCA", []string{"TestPCDSTrustBundleMergedIntoROOTCA"}},
	{"image", KindProxyConfig, IgnoredByIstio, "read by the injector only", nil},
	{"privateKeyProvider", KindProxyConfig, Refused, "refused when set: Istio's SDS server hands Envoy the CryptoMB/QAT private key provider; Wingman's does not yet", []string{"TestUnsupportedSettingsRefused"}},
	{"proxyHeaders", KindProxyConfig, Same, "read by istiod from the node's PROXY_CONFIG metadata", []string{"TestNodeReadBackAsIstiod"}},
	{"fileFlushInterval", KindProxyConfig, Same, "--file-flush-interval-msec", []string{"TestProxyLifecycle", "TestArgsMatchIstio"}},
	{"fileFlushMinSizeKb", KindProxyConfig, Same, "--file-flush-min-size-kb", []string{"TestArgsMatchIstio"}},
	{"statsCompression", KindProxyConfig, Same, "from Istio 1.29 on (the 15090 listener's brotli, zstd and gzip compressors, default on); 1.28 reads the sidecar.istio.io/statsCompression annotation instead, and so does Wingman stamped 1.28", []string{"TestGoldens", "TestReleaseBranches"}},
	{"connectionSettings", KindProxyConfig, Same, "read by istiod from the node's PROXY_CONFIG metadata", []string{"TestNodeReadBackAsIstiod"}},
}

// WriteCompat renders Compat as docs/compat.md.
func WriteCompat(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`# Compatibility with Istio's pilot-agent

<!-- Generated from cmd/pilot-agent/options/compat.go; do not edit. Regenerate with
     go test ./cmd/pilot-agent/options -run TestCompatDoc -update -->

Every environment variable and every ProxyConfig field Istio's agent reads, and what Wingman does
with it. A test keeps this table complete (every variable ` + "`options.Documented`" + ` lists and
every field of istio.io/api's ` + "`meshconfig.ProxyConfig`" + `) and checks that each test it names
exists.

| Status | Meaning |
|---|---|
| same | Wingman does what Istio's agent does; the tests named exercise it |
| same, untested | the code does what Istio's does, but no test exercises it yet |
| different | Wingman behaves differently; the note says how |
| refused | the agent exits 2 at start naming the setting (the note says which values): not supported yet |
| ignored by Istio too | Istio's agent reads it and does nothing with it; neither does Wingman |
| not yet (in progress) | parsed and without effect in this tree; being implemented |
| Wingman only | Wingman's own setting |

| Setting | Kind | Wingman | Note | Tests |
|---|---|---|---|---|
`)
	writeRows(&b, Compat)
	b.WriteString("\n## Logging flags\n\nIstio's root flags of its pkg/log, accepted by every sub-command. Wingman writes Istio's\n" +
		"log lines (`internal/istiolog`).\n\n| Flag | Kind | Wingman | Note | Tests |\n|---|---|---|---|---|\n")
	writeRows(&b, CompatFlags)
	b.WriteString("\n" + SupportMatrix)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRows(b *strings.Builder, rows []CompatRow) {
	for _, r := range rows {
		tests := strings.Join(r.Tests, ", ")
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", r.Name, r.Kind, r.Status,
			strings.ReplaceAll(r.Note, "|", `\|`), tests)
	}
}
