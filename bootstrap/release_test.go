package bootstrap

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// Templates of our own that read every parameter a release defines. The names are facts, each
// set written out here by hand from pkg/bootstrap/option/instances.go at the release's tag (not
// from Release.Params, which they check); the layout is ours: one JSON member per parameter.
const (
	// Every supported tag, 1.28.10 .. master 86c9f01.
	paramsCommonTmpl = `"a1": {{ toJson .config.ConfigPath }}, "a2": {{ toJson .pilot_SAN }}, "a3": {{ toJson .connect_timeout }},
"a4": {{ toJson .cluster }}, "a5": {{ toJson .nodeID }}, "a6": {{ toJson .nodeType }}, "a7": {{ toJson .xds_type }},
"a8": {{ toJson .region }}, "a9": {{ toJson .zone }}, "a10": {{ toJson .sub_zone }}, "a11": {{ toJson .meta_json_str }},
"a12": {{ toJson .runtime_flags }}, "a13": {{ toJson .discovery_address }}, "a14": {{ toJson .xds_root_cert }},
"a15": {{ toJson .localhost }}, "a16": {{ toJson .additional_localhost }}, "a17": {{ toJson .wildcard }},
"a18": {{ toJson .additional_wildcard }}, "a19": {{ toJson .dual_stack }}, "a20": {{ toJson .dns_lookup_family }},
"a21": {{ toJson .outlier_log_path }}, "a22": {{ toJson .custom_file_path }}, "a23": {{ toJson .log_json }},
"a24": {{ toJson .lightstep }}, "a25": {{ toJson .lightstepToken }}, "a26": {{ toJson .stackdriver }},
"a27": {{ toJson .stackdriverProjectID }}, "a28": {{ toJson .stackdriverDebug }}, "a29": {{ toJson .stackdriverMaxAnnotations }},
"a30": {{ toJson .stackdriverMaxAttributes }}, "a31": {{ toJson .stackdriverMaxEvents }}, "a32": {{ toJson .pilot_grpc_address }},
"a33": {{ toJson .zipkin }}, "a34": {{ toJson .datadog }}, "a35": {{ toJson .statsd }}, "a36": {{ toJson .tracing_tls }},
"a37": {{ toJson .envoy_metrics_service_address }}, "a38": {{ toJson .envoy_metrics_service_tls }},
"a39": {{ toJson .envoy_metrics_service_tcp_keepalive }}, "a40": {{ toJson .envoy_accesslog_service_address }},
"a41": {{ toJson .envoy_accesslog_service_tls }}, "a42": {{ toJson .envoy_accesslog_service_tcp_keepalive }},
"a43": {{ toJson .extraStatTags }}, "a44": {{ toJson .inclusionPrefix }}, "a45": {{ toJson .inclusionSuffix }},
"a46": {{ toJson .inclusionRegexps }}, "a47": {{ toJson .envoy_status_port }}, "a48": {{ toJson .envoy_status_port_enable_proxy_protocol }},
"a49": {{ toJson .envoy_prometheus_port }}, "a50": {{ toJson .sts_port }}, "a51": {{ toJson .gcp_project_id }},
"a52": {{ toJson .gcp_project_number }}, "a53": {{ toJson .metadata.InstanceIPs }}, "a54": {{ toJson .sts }},
"a55": {{ toJson .discovery_host }}, "a56": {{ toJson .metadata_discovery }}, "a57": {{ toJson .metrics_localhost_access_only }},
"a58": {{ toJson .load_stats_config_json_str }}, "a59": {{ toJson .workload_identity_socket_file }},
"a60": {{ toJson .histogram_buckets }}, "a61": {{ toJson .stats_flush_interval }}, "a62": {{ toJson .stats_eviction_interval }}`
	// 1.28.10 only (EnvoyStatsCompression).
	params128Tmpl = `, "b1": {{ toJson .stats_compression }}`
	// 1.29.6 and later (EnvoyMetricsStatsCompression, GlobalDownstreamMaxConnections).
	params129Tmpl = `, "c1": {{ toJson .envoy_metrics_stats_compression }}, "c2": {{ toJson .global_downstream_max_connections }}`
	// 1.31.0-rc.0 and master (EnableSelfDiscovery, SecureMetricsPort, SecureMergedMetricsPort).
	params131Tmpl = `, "d1": {{ toJson .enable_self_discovery }}, "d2": {{ toJson .secure_metrics_port }}, "d3": {{ toJson .secure_merged_metrics_port }}`
)

// ownTemplate is our template reading every parameter r defines.
func ownTemplate(r Release) string {
	body := paramsCommonTmpl
	switch {
	case r == Release128:
		body += params128Tmpl
	case r < Release131:
		body += params129Tmpl
	default:
		body += params129Tmpl + params131Tmpl
	}
	return "{" + body + "}"
}

// renderOwn renders src stamped with version and returns the output and the parameters warned.
func renderOwn(t *testing.T, cfg Config, version, src string) (map[string]any, []string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "own.json")
	must(t, os.WriteFile(p, []byte(src), 0o600))
	log, buf := newWarnRecorder()
	cfg.Logger, cfg.IstioVersion = log, version
	out, err := RenderTemplate(t.Context(), cfg, p)
	if err != nil {
		t.Fatalf("%s: %v", version, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%s: %v", version, err)
	}
	var warned []string
	for _, m := range regexp.MustCompile(`parameter=(\S+)`).FindAllStringSubmatch(buf.String(), -1) {
		warned = append(warned, m[1])
	}
	slices.Sort(warned)
	return doc, warned
}

// TestOwnTemplateEachRelease: for each supported release, our template reading every parameter
// the release defines renders without a warning; the template of the next release, stamped with
// this one, warns exactly for the names that release added (and, for 1.28, for the name 1.29
// removed), once each, and renders them as missing keys (toJson of a missing key is null).
func TestOwnTemplateEachRelease(t *testing.T) {
	cfg := baseConfig(t)
	for _, r := range Releases {
		doc, warned := renderOwn(t, cfg, releaseVersion(r), ownTemplate(r))
		if len(warned) != 0 {
			t.Errorf("%s: its own parameters warned: %v", r, warned)
		}
		if len(doc) != len(r.Params()) {
			t.Errorf("%s: template has %d members, the release defines %d parameters", r, len(doc), len(r.Params()))
		}
	}
	for _, tc := range []struct {
		stamp, tmpl Release
		want        []string
		members     []string
	}{
		{Release128, Release129, []string{"envoy_metrics_stats_compression", "global_downstream_max_connections"}, []string{"c1", "c2"}},
		{Release129, Release128, []string{"stats_compression"}, []string{"b1"}},
		{Release130, Release131, []string{"enable_self_discovery", "secure_merged_metrics_port", "secure_metrics_port"}, []string{"d1", "d2", "d3"}},
	} {
		doc, warned := renderOwn(t, cfg, releaseVersion(tc.stamp), ownTemplate(tc.tmpl))
		if !slices.Equal(warned, tc.want) {
			t.Errorf("%s template stamped %s: warned %v, want %v", tc.tmpl, tc.stamp, warned, tc.want)
		}
		for _, m := range tc.members {
			if v, ok := doc[m]; !ok || v != nil {
				t.Errorf("%s template stamped %s: %s = %v, want null (a missing key)", tc.tmpl, tc.stamp, m, v)
			}
		}
	}
}

// TestReleaseOf: the stamped version picks the release; versions outside 1.28-1.32 fall back to
// the nearest one and say so.
func TestReleaseOf(t *testing.T) {
	for v, want := range map[string]struct {
		r  Release
		ok bool
	}{
		"1.28.10": {Release128, true}, "v1.29.0": {Release129, true}, "1.30.3": {Release130, true},
		"1.31.0-rc.0": {Release131, true}, "1.32.0": {Release132, true}, "1.32-dev": {Release132, true},
		"1.27.9": {Release128, false}, "1.33.0": {Release132, false}, "": {Release132, false}, "release-3.1": {Release132, false},
	} {
		if r, ok := ReleaseOf(v); r != want.r || ok != want.ok {
			t.Errorf("ReleaseOf(%q) = %s %v, want %s %v", v, r, ok, want.r, want.ok)
		}
	}
}

func paramsFor(t *testing.T, cfg Config, r Release) map[string]any {
	t.Helper()
	cfg.IstioVersion = releaseVersion(r)
	st, err := newState(cfg)
	must(t, err)
	p, err := st.templateParams(t.Context())
	must(t, err)
	return p
}

// TestReleaseBranches holds each release-specific value to the release's own source.
func TestReleaseBranches(t *testing.T) {
	// Stats compression. 1.28.10 config.go getStatsOptions: stats_compression is the
	// sidecar.istio.io/statsCompression annotation when gzip, zstd or brotli, else "" (always
	// passed). 1.29.6 .. master getProxyConfigOptions: envoy_metrics_stats_compression is
	// ProxyConfig statsCompression, true when unset (#58717, backported to 1.29.0 as #58939).
	cfg := baseConfig(t)
	if p := paramsFor(t, cfg, Release128); p["stats_compression"] != "" || p["envoy_metrics_stats_compression"] != nil {
		t.Errorf("1.28 without the annotation: %v %v", p["stats_compression"], p["envoy_metrics_stats_compression"])
	}
	annotated := baseConfig(t)
	must(t, os.WriteFile(annotated.AnnotationsFile, []byte("sidecar.istio.io/statsCompression=\"zstd\"\n"), 0o600))
	if p := paramsFor(t, annotated, Release128); p["stats_compression"] != "zstd" {
		t.Errorf("1.28 with the annotation: %v", p["stats_compression"])
	}
	must(t, os.WriteFile(annotated.AnnotationsFile, []byte("sidecar.istio.io/statsCompression=\"lz4\"\n"), 0o600))
	if p := paramsFor(t, annotated, Release128); p["stats_compression"] != "" {
		t.Errorf("1.28 with an unknown compressor: %v", p["stats_compression"])
	}
	for _, r := range []Release{Release129, Release130, Release131, Release132} {
		if p := paramsFor(t, cfg, r); p["envoy_metrics_stats_compression"] != true || p["stats_compression"] != nil {
			t.Errorf("%s default: %v %v", r, p["envoy_metrics_stats_compression"], p["stats_compression"])
		}
	}
	off := baseConfig(t)
	off.ProxyConfig.StatsCompression = wrapperspb.Bool(false)
	if p := paramsFor(t, off, Release130); p["envoy_metrics_stats_compression"] != false {
		t.Errorf("1.30 statsCompression false: %v", p["envoy_metrics_stats_compression"])
	}

	// Connection limit (getNodeMetadataOptions). 1.28.10 passes none. 1.29.6 .. 1.31.0-rc.0:
	// proxyMetadata ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS when it parses (any integer),
	// else the runtime value, else MaxInt32. master: connectionSettings first when above 0.
	limit := baseConfig(t)
	limit.ProxyConfig.ConnectionSettings = &meshapi.ProxyConfig_ConnectionSettings{GlobalDownstreamConnectionLimit: wrapperspb.Int32(5000)}
	limit.ProxyConfig.ProxyMetadata = map[string]string{"ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS": "0"}
	limit.ProxyConfig.RuntimeValues = map[string]string{"overload.global_downstream_max_connections": "700"}
	for r, want := range map[Release]any{Release128: nil, Release129: 0, Release131: 0, Release132: 5000} {
		if got := paramsFor(t, limit, r)["global_downstream_max_connections"]; got != want {
			t.Errorf("%s connection limit %v, want %v", r, got, want)
		}
	}
	limit.ProxyConfig.ProxyMetadata = nil
	if got := paramsFor(t, limit, Release130)["global_downstream_max_connections"]; got != 700 {
		t.Errorf("1.30 runtime connection limit %v", got)
	}
	if got := paramsFor(t, cfg, Release129)["global_downstream_max_connections"]; got != math.MaxInt32 {
		t.Errorf("1.29 default connection limit %v", got)
	}

	// Runtime flag defaults (extractRuntimeFlags): fixed_heap_use_allocated true from 1.29.6,
	// coalesce_lb_rebuilds_on_batch_update false from 1.30.3.
	for r, want := range map[Release][2]bool{Release128: {false, false}, Release129: {true, false}, Release130: {true, true}, Release132: {true, true}} {
		flags := paramsFor(t, cfg, r)["runtime_flags"].(string)
		if strings.Contains(flags, `"envoy.reloadable_features.fixed_heap_use_allocated":true`) != want[0] ||
			strings.Contains(flags, `"envoy.reloadable_features.coalesce_lb_rebuilds_on_batch_update":false`) != want[1] {
			t.Errorf("%s runtime flags %s", r, flags)
		}
	}

	// Secure metrics and self discovery: parameters and node metadata from 1.31.0-rc.0
	// (instances.go SecureMetricsPort / SecureMergedMetricsPort, skipped at 0; EnableSelfDiscovery
	// set only when true; GetNodeMetaData ENVOY_SECURE_*_PORT and DNS_PROXY_ADDR).
	sec := baseConfig(t)
	sec.EnvoySecureMetricsPort, sec.EnvoySecureMergedMetricsPort = 15091, 0
	sec.Env = append(sec.Env, "ISTIO_META_ENABLE_SELF_DISCOVERY=true", "DNS_PROXY_ADDR=127.0.0.1:15053")
	p := paramsFor(t, sec, Release131)
	if p["secure_metrics_port"] != 15091 || p["enable_self_discovery"] != true {
		t.Errorf("1.31: %v %v", p["secure_metrics_port"], p["enable_self_discovery"])
	}
	if _, ok := p["secure_merged_metrics_port"]; ok {
		t.Errorf("1.31: secure_merged_metrics_port passed at 0")
	}
	if m := p["meta_json_str"].(string); !strings.Contains(m, `"ENVOY_SECURE_METRICS_PORT":15091`) || !strings.Contains(m, `"DNS_PROXY_ADDR":"127.0.0.1:15053"`) {
		t.Errorf("1.31 metadata %s", m)
	}
	p = paramsFor(t, sec, Release130)
	for _, k := range []string{"secure_metrics_port", "enable_self_discovery"} {
		if _, ok := p[k]; ok {
			t.Errorf("1.30 passes %s", k)
		}
	}
	if m := p["meta_json_str"].(string); strings.Contains(m, "ENVOY_SECURE_METRICS_PORT") || strings.Contains(m, "DNS_PROXY_ADDR") {
		t.Errorf("1.30 metadata %s", m)
	}

	// Service cluster app name (serviceClusterOrDefault): labels.GetApp from 1.30.3 (app, then
	// app.kubernetes.io/name, then service.istio.io/canonical-name); "app" only before.
	k8sName := baseConfig(t)
	must(t, os.WriteFile(k8sName.LabelsFile, []byte("app.kubernetes.io/name=\"ratings\"\n"), 0o600))
	if got := paramsFor(t, k8sName, Release129)["cluster"]; got != "reviews-v1.default" {
		t.Errorf("1.29 cluster %v, want the workload name", got)
	}
	if got := paramsFor(t, k8sName, Release130)["cluster"]; got != "ratings.default" {
		t.Errorf("1.30 cluster %v", got)
	}
}

// TestLocalityLabels: GetNodeMetaData (config.go, every supported tag) makes ISTIO_METAJSON_LABELS
// both LABELS and STATIC_LABELS, one map; a labels file that is read makes LABELS a new map. The
// locality label is rewritten with slashes in LABELS, so in STATIC_LABELS too exactly when no
// labels file was read (issue 28: Wingman kept the dots there). From 1.29.6 the locality comes
// from topology.istio.io/locality when present (pkg/model/proxy.go GetLocalityLabel).
func TestLocalityLabels(t *testing.T) {
	meta := func(cfg Config, r Release) (labels, static map[string]string, loc *Locality) {
		cfg.IstioVersion = releaseVersion(r)
		st, err := newState(cfg)
		must(t, err)
		return st.meta.Labels, st.meta.StaticLabels, st.locality
	}
	noFile := baseConfig(t)
	noFile.LabelsFile = filepath.Join(t.TempDir(), "absent")
	noFile.Env = append(noFile.Env, `ISTIO_METAJSON_LABELS={"app":"x","istio-locality":"r1.z1.s1"}`)
	for _, r := range Releases {
		labels, static, loc := meta(noFile, r)
		if labels["istio-locality"] != "r1/z1/s1" || static["istio-locality"] != "r1/z1/s1" || loc.Zone != "z1" {
			t.Errorf("%s without a labels file: LABELS %v STATIC_LABELS %v", r, labels, static)
		}
	}
	withFile := baseConfig(t)
	withFile.Env = noFile.Env
	labels, static, _ := meta(withFile, Release132)
	if labels["istio-locality"] != "r1/z1/s1" || static["istio-locality"] != "r1.z1.s1" || labels["version"] != "v1" {
		t.Errorf("with a labels file: LABELS %v STATIC_LABELS %v", labels, static)
	}

	topo := baseConfig(t)
	must(t, os.WriteFile(topo.LabelsFile, []byte("topology.istio.io/locality=\"r2.z2\"\nistio-locality=\"r1.z1\"\n"), 0o600))
	if labels, _, loc := meta(topo, Release128); loc.Region != "r1" || labels["istio-locality"] != "r1/z1" {
		t.Errorf("1.28 reads istio-locality only: %v %v", loc, labels)
	}
	if labels, _, loc := meta(topo, Release129); loc.Region != "r2" || loc.Zone != "z2" || labels["istio-locality"] != "r2/z2" {
		t.Errorf("1.29 reads topology.istio.io/locality first: %v %v", loc, labels)
	}
}

// TestIstio128TemplateBranches renders Istio 1.28.10's own template (read from Istio's git
// repository at test time) stamped 1.28: one compressor from the annotation, the connection limit
// the template writes itself (2147483647), no compressors without the annotation.
func TestIstio128TemplateBranches(t *testing.T) {
	path := istioTemplate(t, Release128.Tag())
	cfg := baseConfig(t)
	cfg.IstioVersion = releaseVersion(Release128)
	cfg.ProxyConfig.ProxyMetadata = map[string]string{"ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS": "100"}
	must(t, os.WriteFile(cfg.AnnotationsFile, []byte("sidecar.istio.io/statsCompression=\"gzip\"\n"), 0o600))
	out, err := RenderTemplate(t.Context(), cfg, path)
	must(t, err)
	var doc map[string]any
	must(t, json.Unmarshal(out, &doc))
	filters := at(doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "http_filters").([]any)
	if len(filters) != 2 || at(filters[0], "typed_config", "compressor_library", "typed_config", "@type") != "type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip" {
		t.Errorf("1.28 compressor filters %v", filters)
	}
	if v := at(doc, "overload_manager", "resource_monitors", 0, "typed_config", "max_active_downstream_connections"); v != float64(math.MaxInt32) {
		t.Errorf("1.28 connection limit %v", v)
	}
}

// TestServiceClusterAsIstio: node.cluster as getServiceCluster and serviceClusterOrDefault
// compute it (pkg/bootstrap/config.go, every supported tag; labels.CanonicalService's order
// service.istio.io/canonical-name, app.kubernetes.io/name, app, then the workload name).
func TestServiceClusterAsIstio(t *testing.T) {
	tracing := func(m meshapi.ProxyConfig_TracingServiceName) *meshapi.ProxyConfig {
		return &meshapi.ProxyConfig{ClusterName: &meshapi.ProxyConfig_TracingServiceName_{TracingServiceName: m}}
	}
	for _, tc := range []struct {
		name   string
		pc     *meshapi.ProxyConfig
		labels map[string]string
		wl     string
		want   string
	}{
		{"explicit", &meshapi.ProxyConfig{ClusterName: &meshapi.ProxyConfig_ServiceCluster{ServiceCluster: "gw"}}, map[string]string{"app": "a"}, "w", "gw"},
		{"default from app", &meshapi.ProxyConfig{ClusterName: &meshapi.ProxyConfig_ServiceCluster{ServiceCluster: "istio-proxy"}}, map[string]string{"app": "a"}, "w", "a.ns"},
		{"app present but empty", nil, map[string]string{"app": ""}, "w", ".ns"},
		{"workload name", nil, nil, "w", "w.ns"},
		{"nothing", nil, nil, "", "istio-proxy.ns"},
		{"canonical only, canonical label", tracing(meshapi.ProxyConfig_CANONICAL_NAME_ONLY), map[string]string{"app": "a", canonicalNameLabel: "c"}, "w", "c"},
		{"canonical only, app label", tracing(meshapi.ProxyConfig_CANONICAL_NAME_ONLY), map[string]string{"app": "a"}, "w", "a"},
		{"canonical only, nothing", tracing(meshapi.ProxyConfig_CANONICAL_NAME_ONLY), nil, "w", "w"},
		{"canonical only, no workload", tracing(meshapi.ProxyConfig_CANONICAL_NAME_ONLY), nil, "", "istio-proxy.ns"},
		{"canonical and namespace", tracing(meshapi.ProxyConfig_CANONICAL_NAME_AND_NAMESPACE), map[string]string{"app.kubernetes.io/name": "k"}, "w", "k.ns"},
		{"app label and namespace", tracing(meshapi.ProxyConfig_APP_LABEL_AND_NAMESPACE), map[string]string{"app": "a", canonicalNameLabel: "c"}, "w", "a.ns"},
	} {
		m := &Metadata{Labels: tc.labels, WorkloadName: tc.wl}
		if got := serviceCluster(tc.pc, m, "ns", NewestRelease); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
