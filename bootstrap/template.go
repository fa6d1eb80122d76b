package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// RenderTemplate renders a custom bootstrap template (ISTIO_BOOTSTRAP, --templateFile or
// proxyBootstrapTemplatePath) as Istio's agent does: Go's text/template over a map of parameters
// with Istio's names and value forms (nodeID, cluster, region, zone, sub_zone, meta_json_str,
// runtime_flags, config, localhost, wildcard, xds_type, zipkin, ...; templateParams lists them),
// and the functions in templateFuncs. A template that refers to a parameter Wingman does not
// provide is refused before it runs, naming the parameter and its line (Istio would print
// "<no value>" into the JSON and let Envoy fail on it).
func RenderTemplate(ctx context.Context, cfg Config, templatePath string) ([]byte, error) {
	text, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, fmt.Errorf("bootstrap template %s: %w", templatePath, err)
	}
	st, err := newState(cfg)
	if err != nil {
		return nil, err
	}
	params, err := st.templateParams(ctx)
	if err != nil {
		return nil, err
	}
	out, err := executeTemplate(templatePath, string(text), params)
	if err != nil {
		return nil, err
	}
	if err := checkSyntax(templatePath, out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkSyntax refuses a rendered template that is not JSON (or YAML, for templates named
// *.yaml or *.yaml.tmpl, which Istio hands to Envoy as YAML), naming the line.
func checkSyntax(templatePath string, out []byte) error {
	if strings.HasSuffix(templatePath, ".yaml") || strings.HasSuffix(templatePath, ".yaml.tmpl") {
		var v any
		if err := yaml.Unmarshal(out, &v); err != nil {
			return fmt.Errorf("bootstrap template %s: output is not YAML: %w", templatePath, err)
		}
		return nil
	}
	if json.Valid(out) { // checks without building the document: the render's garbage stays small
		return nil
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(out[:min(int(se.Offset), len(out))], []byte("\n"))
			return fmt.Errorf("bootstrap template %s: output is not JSON: line %d of the output: %w", templatePath, line, err)
		}
		return fmt.Errorf("bootstrap template %s: output is not JSON: %w", templatePath, err)
	}
	return nil
}

// executeTemplate parses text, checks its parameter references against params and runs it.
func executeTemplate(name, text string, params map[string]any) ([]byte, error) {
	t, err := template.New(name).Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("bootstrap template %s: %w", name, err)
	}
	if err := checkParams(t, params); err != nil {
		return nil, fmt.Errorf("bootstrap template %s: %w", name, err)
	}
	var out bytes.Buffer
	out.Grow(len(text) + len(text)/4) // the output is about the template's size: one allocation, not a doubling series
	if err := t.Execute(&out, params); err != nil {
		return nil, fmt.Errorf("bootstrap template %s: %w", name, err)
	}
	return out.Bytes(), nil
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
// Every name Istio's agent can set is present (zero when Istio would leave it out), so a template
// written against Istio's parameter set never reads a missing key. Names and forms were read from
// Istio's pkg/bootstrap/option/instances.go and config.go; see PARITY.md.
func (st *state) templateParams(ctx context.Context) (map[string]any, error) {
	runtime, err := toJSON(st.runtimeFlags())
	if err != nil {
		return nil, err
	}
	stats, err := st.statsConfig()
	if err != nil {
		return nil, err
	}
	p := map[string]any{
		"nodeID":                                st.nodeID,
		"nodeType":                              string(st.cfg.NodeType),
		"cluster":                               st.cluster,
		"region":                                st.locality.Region,
		"zone":                                  st.locality.Zone,
		"sub_zone":                              st.locality.SubZone,
		"meta_json_str":                         string(st.metaJSON),
		"metadata":                              st.meta,
		"runtime_flags":                         runtime,
		"config":                                st.pc,
		"discovery_address":                     st.pc.GetDiscoveryAddress(),
		"discovery_host":                        discoveryHost(st.pc.GetDiscoveryAddress()),
		"xds_root_cert":                         "",
		"localhost":                             st.localhost,
		"additional_localhost":                  st.family.AdditionalLocalhost,
		"wildcard":                              st.wildcard,
		"additional_wildcard":                   st.additional,
		"dual_stack":                            st.additional != "",
		"dns_lookup_family":                     st.dnsFamily,
		"xds_type":                              st.xdsType,
		"envoy_status_port":                     st.cfg.EnvoyStatusPort,
		"envoy_prometheus_port":                 st.cfg.EnvoyPrometheusPort,
		"sts":                                   st.cfg.STSPort != 0,
		"sts_port":                              st.cfg.STSPort,
		"gcp_project_id":                        "",
		"gcp_project_number":                    st.cfg.PlatformMetadata["gcp_project_number"],
		"metadata_discovery":                    st.discovery,
		"deferred_cluster_creation":             true,
		"deferred_stats_creation":               true,
		"bypass_overload_manager":               true,
		"log_json":                              st.cfg.LogAsJSON,
		"workload_identity_socket_file":         st.cfg.WorkloadIdentitySocketFile,
		"metrics_localhost_access_only":         st.pc.GetProxyMetadata()["METRICS_LOCALHOST_ACCESS_ONLY"] == "true",
		"pilot_SAN":                             sanMatchers(st.meta.PilotSubjectAltName),
		"outlier_log_path":                      st.cfg.OutlierLogPath,
		"load_stats_config_json_str":            "",
		"lightstepToken":                        st.LightstepTokenPath(),
		"lightstep":                             "",
		"zipkin":                                "",
		"datadog":                               "",
		"tracing_tls":                           "",
		"stackdriver":                           false,
		"stackdriverProjectID":                  "",
		"stackdriverDebug":                      false,
		"stackdriverMaxAnnotations":             int64(0),
		"stackdriverMaxAttributes":              int64(0),
		"stackdriverMaxEvents":                  int64(0),
		"pilot_grpc_address":                    "",
		"statsd":                                "",
		"envoy_metrics_service_address":         "",
		"envoy_metrics_service_tls":             "",
		"envoy_metrics_service_tcp_keepalive":   "",
		"envoy_accesslog_service_address":       "",
		"envoy_accesslog_service_tls":           "",
		"envoy_accesslog_service_tcp_keepalive": "",
		"extraStatTags":                         []string(nil),
		"inclusionPrefix":                       []string(nil),
		"inclusionSuffix":                       []string(nil),
		"inclusionRegexps":                      []string(nil),
		"histogram_buckets":                     stats.HistogramBucketSettings,
		"stats_compression":                     "",

		// Parameters of Istio releases after the stored option/instances.go (names as the
		// issue and Istio's release notes give them; see PARITY.md).
		"global_downstream_max_connections":       st.globalDownstreamMaxConnections(),
		"envoy_secure_metrics_port":               st.cfg.EnvoySecureMetricsPort,
		"envoy_secure_merged_metrics_port":        st.cfg.EnvoySecureMergedMetricsPort,
		"secure_metrics_port":                     st.cfg.EnvoySecureMetricsPort,
		"secure_merged_metrics_port":              st.cfg.EnvoySecureMergedMetricsPort,
		"stats_flush_interval":                    "",
		"stats_eviction_interval":                 "",
		"enable_self_discovery":                   st.selfDiscovery(),
		"envoy_status_port_enable_proxy_protocol": st.cfg.StatusPortProxyProtocol,
		"custom_file_path":                        "",
	}
	if st.cfg.FileCredential { // option.CustomFileSDSPath (instances.go): "custom_file_path"
		p["custom_file_path"] = DefaultCredentialFilesSocket
	}
	p["stats_flush_interval"], p["stats_eviction_interval"] = st.statsIntervalValues()
	if sa, err := st.hostPort("discoveryAddress", st.pc.GetDiscoveryAddress()); err == nil {
		p["pilot_grpc_address"] = addressJSON(sa)
	}
	if id := st.cfg.PlatformMetadata["gcp_project"]; id != "" && st.cfg.STSPort != 0 {
		p["gcp_project_id"] = id
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
	for _, t := range stats.StatsTags[len(delimitedTags) : len(stats.StatsTags)-len(trailingTags)] {
		tags = append(tags, t.TagName)
	}
	p["inclusionPrefix"], p["inclusionSuffix"], p["inclusionRegexps"], p["extraStatTags"] = prefixes, suffixes, regexps, tags
	if st.statsCompressed() {
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
	if st.pc.GetStatsdUdpAddress() != "" {
		sa, err := st.statsdAddress(ctx)
		if err != nil {
			return nil, err
		}
		p["statsd"] = addressJSON(sa)
	}
	for _, svc := range []struct {
		key, name, field string
		rs               *meshapi.RemoteService
	}{
		{"envoy_metrics_service", "envoy_metrics_service", "envoyMetricsService", st.pc.GetEnvoyMetricsService()},
		{"envoy_accesslog_service", "envoy_accesslog_service", "envoyAccessLogService", st.pc.GetEnvoyAccessLogService()},
	} {
		if svc.rs.GetAddress() == "" {
			continue
		}
		c, err := st.remoteServiceCluster(svc.name, svc.field, svc.rs)
		if err != nil {
			return nil, err
		}
		p[svc.key+"_address"] = addressJSON(c.LoadAssignment.Endpoints[0].LbEndpoints[0].Endpoint.Address.SocketAddress)
		if c.TransportSocket != nil {
			if p[svc.key+"_tls"], err = toJSON(c.TransportSocket); err != nil {
				return nil, err
			}
		}
		if c.UpstreamConnectionOptions != nil {
			if p[svc.key+"_tcp_keepalive"], err = toJSON(c.UpstreamConnectionOptions); err != nil {
				return nil, err
			}
		}
	}
	if sd, ok := st.pc.GetTracing().GetTracer().(*meshapi.Tracing_Stackdriver_); ok {
		p["stackdriver"] = true
		p["stackdriverProjectID"] = st.cfg.PlatformMetadata["gcp_project"]
		p["stackdriverDebug"] = sd.Stackdriver.GetDebug()
		orDefault := func(v interface{ GetValue() int64 }, isNil bool) int64 {
			if isNil {
				return 200 // Istio's default for each limit
			}
			return v.GetValue()
		}
		p["stackdriverMaxAnnotations"] = orDefault(sd.Stackdriver.GetMaxNumberOfAnnotations(), sd.Stackdriver.GetMaxNumberOfAnnotations() == nil)
		p["stackdriverMaxAttributes"] = orDefault(sd.Stackdriver.GetMaxNumberOfAttributes(), sd.Stackdriver.GetMaxNumberOfAttributes() == nil)
		p["stackdriverMaxEvents"] = orDefault(sd.Stackdriver.GetMaxNumberOfMessageEvents(), sd.Stackdriver.GetMaxNumberOfMessageEvents() == nil)
	}
	return p, nil
}

// sanMatchers is Istio's sanConverter: the SANs as a JSON list of exact string matchers.
func sanMatchers(sans []string) string {
	m := make([]map[string]string, len(sans))
	for i, s := range sans {
		m[i] = map[string]string{"exact": s}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// discoveryHost is the host part of discoveryAddress (Istio splits at the first ':').
func discoveryHost(addr string) string {
	host, _, _ := strings.Cut(addr, ":")
	return host
}

// DefaultTemplatePath is where Istio's proxyv2 image keeps its own bootstrap template.
const DefaultTemplatePath = "./var/lib/istio/envoy/envoy_bootstrap_tmpl.json"

// EffectiveTemplatePath is the template to render with Istio's precedence (instance.go
// GetEffectiveTemplatePath): ISTIO_BOOTSTRAP > --templateFile (Istio copies the flag into
// proxyBootstrapTemplatePath) > ProxyConfig proxyBootstrapTemplatePath > DefaultTemplatePath. A
// customConfigFile is not a template: Istio hands it to Envoy as is, and so does cmd.
func EffectiveTemplatePath(istioBootstrapEnv, templateFileFlag string, pc *meshapi.ProxyConfig) string {
	p := istioBootstrapEnv
	if p == "" {
		p = templateFileFlag
	}
	if p == "" {
		p = pc.GetProxyBootstrapTemplatePath()
	}
	if p == "" {
		p = DefaultTemplatePath
	}
	return p
}

// IsDefaultTemplate says whether p names Istio's own template path (relative or absolute).
func IsDefaultTemplate(p string) bool {
	return p == DefaultTemplatePath || p == strings.TrimPrefix(DefaultTemplatePath, ".")
}

// RenderEffective renders the bootstrap Envoy starts from for the template path
// EffectiveTemplatePath chose. A template file that is there is rendered, Istio's own included:
// the image's template is what its Istio release gives Envoy, so the bootstrap follows the image
// (Istio's agent renders it likewise). The typed render, Istio's default template as typed
// values, is used when Istio's own template path holds no file (an image without Istio's
// template); a custom template path that holds none is an error naming it.
func RenderEffective(ctx context.Context, cfg Config, templatePath string) ([]byte, error) {
	if templatePath == "" {
		return Render(ctx, cfg)
	}
	if IsDefaultTemplate(templatePath) {
		if _, err := os.Stat(templatePath); errors.Is(err, fs.ErrNotExist) {
			return Render(ctx, cfg)
		}
	}
	return RenderTemplate(ctx, cfg, templatePath)
}
