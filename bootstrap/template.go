package bootstrap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/wingman-mesh/wingman/bootstrap/internal/tmpl"
)

// RenderTemplate renders a custom bootstrap template (ISTIO_BOOTSTRAP or proxyBootstrapTemplatePath)
// as Go text/template does (internal/tmpl: text/template's syntax and semantics with
// missingkey=zero, without the reflective method lookup that costs the binary ~2.5 MB; method
// calls are protobuf getters and String) and the parameter names Istio gives templates (nodeID, cluster, region,
// zone, sub_zone, meta_json_str, runtime_flags, config, localhost, wildcard, xds_type, zipkin, ...).
// Functions: toJSON/toJson plus a small set of sprig's generic ones (default, quote, join, contains,
// hasPrefix, hasSuffix, replace, lower, upper, trim, empty).
func RenderTemplate(cfg Config, templatePath string) ([]byte, error) {
	text, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, fmt.Errorf("bootstrap template %s: %w", templatePath, err)
	}
	st, err := newState(cfg)
	if err != nil {
		return nil, err
	}
	params, err := st.templateParams()
	if err != nil {
		return nil, err
	}
	t, err := tmpl.Parse(templatePath, string(text), templateFuncs)
	if err != nil {
		return nil, fmt.Errorf("bootstrap template %s: %w", templatePath, err)
	}
	var out bytes.Buffer
	if err := t.Execute(&out, params); err != nil {
		return nil, fmt.Errorf("bootstrap template %s: %w", templatePath, err)
	}
	return out.Bytes(), nil
}

var templateFuncs = map[string]any{
	"toJSON": toJSON, "toJson": toJSON,
	"default": func(d, v any) any {
		if v == nil || v == "" || v == false || v == 0 {
			return d
		}
		return v
	},
	"quote":     func(s string) string { return fmt.Sprintf("%q", s) },
	"join":      func(sep string, l []string) string { return strings.Join(l, sep) },
	"contains":  func(sub, s string) bool { return strings.Contains(s, sub) },
	"hasPrefix": func(p, s string) bool { return strings.HasPrefix(s, p) },
	"hasSuffix": func(p, s string) bool { return strings.HasSuffix(s, p) },
	"replace":   func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
	"lower":     strings.ToLower,
	"upper":     strings.ToUpper,
	"trim":      strings.TrimSpace,
	"empty":     func(v any) bool { return v == nil || v == "" || v == false || v == 0 },
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// addressJSON is Istio's addressConverter: host:port to a socket_address body.
func addressJSON(sa *SocketAddress) string {
	b, _ := json.Marshal(map[string]any{"address": sa.Address, "port_value": sa.PortValue})
	return string(b)
}

// templateParams builds the map Istio's templates read, with Istio's names and value forms.
func (st *state) templateParams() (map[string]any, error) {
	runtime, err := toJSON(st.runtimeFlags())
	if err != nil {
		return nil, err
	}
	stats, err := st.statsConfig()
	if err != nil {
		return nil, err
	}
	p := map[string]any{
		"nodeID":                        st.nodeID,
		"nodeType":                      string(st.cfg.NodeType),
		"cluster":                       st.cluster,
		"meta_json_str":                 string(st.metaJSON),
		"runtime_flags":                 runtime,
		"config":                        st.pc,
		"discovery_address":             st.pc.GetDiscoveryAddress(),
		"localhost":                     st.localhost,
		"wildcard":                      st.wildcard,
		"dual_stack":                    st.additional != "",
		"additional_wildcard":           st.additional,
		"dns_lookup_family":             st.dnsFamily,
		"xds_type":                      st.xdsType,
		"envoy_status_port":             st.cfg.EnvoyStatusPort,
		"envoy_prometheus_port":         st.cfg.EnvoyPrometheusPort,
		"sts_port":                      st.cfg.STSPort,
		"metadata_discovery":            st.discovery,
		"log_json":                      st.cfg.LogAsJSON,
		"workload_identity_socket_file": st.cfg.WorkloadIdentitySocketFile,
		"metrics_localhost_access_only": st.pc.GetProxyMetadata()["METRICS_LOCALHOST_ACCESS_ONLY"] == "true",
		"lightstepToken":                st.LightstepTokenPath(),
		"metadata":                      st.meta,
	}
	if st.locality.Region != "" {
		p["region"] = st.locality.Region
	}
	if st.locality.Zone != "" {
		p["zone"] = st.locality.Zone
	}
	if st.locality.SubZone != "" {
		p["sub_zone"] = st.locality.SubZone
	}
	if len(st.meta.PilotSubjectAltName) > 0 {
		p["pilot_SAN"] = st.meta.PilotSubjectAltName
	}
	if st.cfg.OutlierLogPath != "" {
		p["outlier_log_path"] = st.cfg.OutlierLogPath
	}
	if s, ok := st.meta.Raw["LOAD_STATS_CONFIG_JSON"].(string); ok {
		p["load_stats_config_json_str"] = s
	}
	var prefixes, suffixes, regexps, tags []string
	for _, m := range stats.StatsMatcher.InclusionList.Patterns {
		switch {
		case m.SafeRegex != nil:
			regexps = append(regexps, m.SafeRegex.Regex)
		case m.Suffix != "":
			suffixes = append(suffixes, m.Suffix)
		case m.Prefix != "" && m.Prefix != "reporter=" && m.Prefix != "component" && m.Prefix != "istio" && m.Prefix != "workload_discovery":
			prefixes = append(prefixes, m.Prefix)
		}
	}
	for _, t := range stats.StatsTags[len(fixedTags) : len(stats.StatsTags)-len(trailingTags)] {
		tags = append(tags, t.TagName)
	}
	setList := func(k string, v []string) {
		if len(v) > 0 {
			p[k] = v
		}
	}
	setList("inclusionPrefix", prefixes)
	setList("inclusionSuffix", suffixes)
	setList("inclusionRegexps", regexps)
	setList("extraStatTags", tags)
	if len(stats.HistogramBucketSettings) > 0 {
		p["histogram_buckets"] = stats.HistogramBucketSettings
	}
	if sc := st.pc.GetStatsCompression(); sc == nil || sc.GetValue() {
		p["stats_compression"] = "gzip"
	}
	if tr, cl, err := st.tracing(); err != nil {
		return nil, err
	} else if tr != nil {
		addr := addressJSON(cl.LoadAssignment.Endpoints[0].LbEndpoints[0].Endpoint.Address.SocketAddress)
		switch cl.Name {
		case "zipkin":
			p["zipkin"] = addr
		case "lightstep":
			p["lightstep"] = addr
		case "datadog_agent":
			p["datadog"] = addr
		}
		if cl.TransportSocket != nil {
			ts, err := toJSON(cl.TransportSocket)
			if err != nil {
				return nil, err
			}
			p["tracing_tls"] = ts
		}
	}
	if a := st.pc.GetStatsdUdpAddress(); a != "" {
		if sa, err := st.hostPort("statsdUdpAddress", a); err == nil {
			p["statsd"] = addressJSON(sa)
		}
	}
	if a := st.pc.GetEnvoyMetricsService().GetAddress(); a != "" {
		if sa, err := st.hostPort("envoyMetricsService.address", a); err == nil {
			p["envoy_metrics_service_address"] = addressJSON(sa)
		}
	}
	if a := st.pc.GetEnvoyAccessLogService().GetAddress(); a != "" {
		if sa, err := st.hostPort("envoyAccessLogService.address", a); err == nil {
			p["envoy_accesslog_service_address"] = addressJSON(sa)
		}
	}
	return p, nil
}

// EffectiveTemplatePath is Istio's template precedence: ISTIO_BOOTSTRAP (passed in) >
// customConfigFile > proxyBootstrapTemplatePath > "" (the built-in typed render). When
// customConfigFile is set Istio hands that file to Envoy as-is; cmd should do the same.
func EffectiveTemplatePath(istioBootstrapEnv string, cfg Config) string {
	switch {
	case istioBootstrapEnv != "":
		return istioBootstrapEnv
	case cfg.ProxyConfig.GetCustomConfigFile() != "":
		return cfg.ProxyConfig.GetCustomConfigFile()
	default:
		return cfg.ProxyConfig.GetProxyBootstrapTemplatePath()
	}
}
