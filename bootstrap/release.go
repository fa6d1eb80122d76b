package bootstrap

import (
	"slices"
	"strconv"
	"strings"
)

// Release is an Istio release whose agent Wingman follows. Where releases differ (the template
// parameters option/instances.go passes, their values, a few node metadata rules), the release
// stamped into the binary (Config.IstioVersion: the Dockerfile's ISTIO_VERSION, the version of the
// proxyv2 image it is built on) applies. Each constant names the tag its facts were read at, in
// Istio's own repository; docs/compat.md has the support matrix.
type Release int

const (
	Release128 Release = iota // 1.28.x, read at tag 1.28.10
	Release129                // 1.29.x, read at tag 1.29.6
	Release130                // 1.30.x, read at tag 1.30.3
	Release131                // 1.31.x, read at tag 1.31.0-rc.0
	Release132                // master 86c9f01 (2026-08, VERSION 1.32)

	// OldestRelease and NewestRelease bound the supported releases.
	OldestRelease = Release128
	NewestRelease = Release132
)

// Releases lists every supported release, oldest first.
var Releases = []Release{Release128, Release129, Release130, Release131, Release132}

// Minor is the release's minor version (28 for 1.28).
func (r Release) Minor() int { return 28 + int(r) }

// Tag is the Istio git tag (or master's commit) the release's facts were read at.
func (r Release) Tag() string {
	switch r {
	case Release128:
		return "1.28.10"
	case Release129:
		return "1.29.6"
	case Release130:
		return "1.30.3"
	case Release131:
		return "1.31.0-rc.0"
	default:
		return "master 86c9f01"
	}
}

func (r Release) String() string { return "1." + strconv.Itoa(r.Minor()) }

// ReleaseOf maps an Istio version ("1.30.3", "v1.29.0", "1.32.0-alpha...") to the release whose
// behaviour applies. supported is false for a version outside 1.28-1.32: an older one gets 1.28's
// behaviour, a newer one or one that is not a version (a dev build's "" or a branch name) the
// newest's; the caller says so in its log.
func ReleaseOf(version string) (r Release, supported bool) {
	v := strings.TrimPrefix(version, "v")
	major, rest, ok := strings.Cut(v, ".")
	if !ok || major != "1" {
		return NewestRelease, false
	}
	minorText := rest
	if i := strings.IndexFunc(rest, func(c rune) bool { return c < '0' || c > '9' }); i >= 0 {
		minorText = rest[:i]
	}
	minor, err := strconv.Atoi(minorText)
	if err != nil {
		return NewestRelease, false
	}
	switch {
	case minor < OldestRelease.Minor():
		return OldestRelease, false
	case minor > NewestRelease.Minor():
		return NewestRelease, false
	}
	return Release(minor - OldestRelease.Minor()), true
}

// Every template parameter name a release's pkg/bootstrap/option/instances.go defines, read at
// the release's tag. Whether the agent passes a name for given inputs is toTemplateParams'
// business (config.go at the same tag); a name outside its release's set is an unknown parameter
// (see RenderTemplate).
var (
	// Defined at every supported tag (1.28.10 .. master): option/instances.go.
	paramsCommon = []string{
		"config", "pilot_SAN", "connect_timeout", "cluster", "nodeID", "nodeType", "xds_type",
		"region", "zone", "sub_zone", "meta_json_str", "runtime_flags", "discovery_address",
		"xds_root_cert", "localhost", "additional_localhost", "wildcard", "additional_wildcard",
		"dual_stack", "dns_lookup_family", "outlier_log_path", "custom_file_path", "log_json",
		"lightstep", "lightstepToken", "stackdriver", "stackdriverProjectID", "stackdriverDebug",
		"stackdriverMaxAnnotations", "stackdriverMaxAttributes", "stackdriverMaxEvents",
		"pilot_grpc_address", "zipkin", "datadog", "statsd", "tracing_tls",
		"envoy_metrics_service_address", "envoy_metrics_service_tls", "envoy_metrics_service_tcp_keepalive",
		"envoy_accesslog_service_address", "envoy_accesslog_service_tls", "envoy_accesslog_service_tcp_keepalive",
		"extraStatTags", "inclusionPrefix", "inclusionSuffix", "inclusionRegexps",
		"envoy_status_port", "envoy_status_port_enable_proxy_protocol", "envoy_prometheus_port",
		"sts_port", "gcp_project_id", "gcp_project_number", "metadata", "sts", "discovery_host",
		"metadata_discovery", "metrics_localhost_access_only", "load_stats_config_json_str",
		"workload_identity_socket_file", "histogram_buckets", "stats_flush_interval",
		"stats_eviction_interval",
	}
	// 1.28.10 only: EnvoyStatsCompression (the sidecar.istio.io/statsCompression annotation).
	params128 = []string{"stats_compression"}
	// 1.29.0 on (backport #58939 of #58717, and #58900): the compressors from ProxyConfig
	// statsCompression, and the overload manager's connection limit.
	params129 = []string{"envoy_metrics_stats_compression", "global_downstream_max_connections"}
	// 1.31.0-rc.0 on: self discovery and the secure metrics listeners.
	params131 = []string{"enable_self_discovery", "secure_metrics_port", "secure_merged_metrics_port"}
)

// Params lists the template parameter names r defines.
func (r Release) Params() []string {
	out := append([]string(nil), paramsCommon...)
	if r < Release129 {
		return append(out, params128...)
	}
	out = append(out, params129...)
	if r >= Release131 {
		out = append(out, params131...)
	}
	return out
}

// defines says whether r's option/instances.go defines the parameter name (no allocation: it
// runs for every parameter a template reads).
func (r Release) defines(name string) bool {
	switch {
	case slices.Contains(paramsCommon, name):
		return true
	case r < Release129:
		return slices.Contains(params128, name)
	case slices.Contains(params129, name):
		return true
	}
	return r >= Release131 && slices.Contains(params131, name)
}

// The per-release rules of the agent's code (each read at the release's tag).

// runtimeFixedHeap: extractRuntimeFlags' default envoy.reloadable_features.fixed_heap_use_allocated
// (config.go, absent at 1.28.10, present from 1.29.6).
func (r Release) runtimeFixedHeap() bool { return r >= Release129 }

// runtimeCoalesce: the default envoy.reloadable_features.coalesce_lb_rebuilds_on_batch_update
// false (config.go, from 1.30.3).
func (r Release) runtimeCoalesce() bool { return r >= Release130 }

// connectionSettingsLimit: ProxyConfig connectionSettings.globalDownstreamConnectionLimit ranks
// first for the connection limit (config.go getNodeMetadataOptions, master only).
func (r Release) connectionSettingsLimit() bool { return r >= Release132 }

// topologyLocality: GetNodeMetaData reads topology.istio.io/locality ahead of istio-locality
// (pkg/model/proxy.go GetLocalityLabel(labels), from 1.29.6; 1.28.10 reads istio-locality only).
func (r Release) topologyLocality() bool { return r >= Release129 }

// appFallbacks: the service cluster's app name also comes from app.kubernetes.io/name and
// service.istio.io/canonical-name (config.go serviceClusterOrDefault with labels.GetApp, from
// 1.30.3; 1.28.10 and 1.29.6 read the "app" label only).
func (r Release) appFallbacks() bool { return r >= Release130 }

// secureMetricsAndSelfDiscovery: ENVOY_SECURE_METRICS_PORT, ENVOY_SECURE_MERGED_METRICS_PORT,
// ISTIO_META_ENABLE_SELF_DISCOVERY and DNS_PROXY_ADDR in the node metadata (config.go
// GetNodeMetaData, from 1.31.0-rc.0).
func (r Release) secureMetricsAndSelfDiscovery() bool { return r >= Release131 }
