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

	"github.com/wingman-mesh/wingman/internal/environ"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// RenderTemplate renders a bootstrap template (the image's own, ISTIO_BOOTSTRAP, --templateFile
// or proxyBootstrapTemplatePath) as the stamped release's agent does (Release, from
// Config.IstioVersion): Go's text/template over a map of that release's parameters with Istio's
// names, presence rules and value forms (templateParams), and the functions in templateFuncs,
// default options (no missingkey option at any supported tag: instance.go newTemplate). A
// parameter the release does not define (a template newer than the release) does not stop the
// render: it renders as text/template renders a missing map key ("<no value>" when printed, false
// in if), as with Istio, and is logged once as a warning naming it and its line.
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
	out, unknown, err := executeTemplateFor(templatePath, string(text), params, st.release.defines)
	if err != nil {
		return nil, err
	}
	for _, u := range unknown {
		st.logger().Warn("bootstrap template reads a parameter the Istio release does not pass; rendered as a missing key",
			"parameter", u.Name, "at", u.Location, "release", st.release.String(), "template", templatePath)
	}
	if !isYAMLTemplate(templatePath) {
		out = dropTrailingCommas(out)
	}
	if err := checkSyntax(templatePath, out); err != nil {
		return nil, err
	}
	return out, nil
}

// TemplateUnknownParams lists the parameters the template at templatePath reads that the stamped
// release (Config.IstioVersion) does not define; `pilot-agent bootstrap --validate` prints them.
func TemplateUnknownParams(cfg Config, templatePath string) ([]UnknownParam, error) {
	text, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, fmt.Errorf("bootstrap template %s: %w", templatePath, err)
	}
	t, err := template.New(templatePath).Funcs(templateFuncs).Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("bootstrap template %s: %w", templatePath, err)
	}
	rel, _ := ReleaseOf(cfg.IstioVersion)
	return unknownParams(t, rel.defines), nil
}

func isYAMLTemplate(p string) bool {
	return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yaml.tmpl")
}

// checkSyntax refuses a rendered template that is not JSON (or YAML, for templates named
// *.yaml or *.yaml.tmpl, which Istio hands to Envoy as YAML), naming the line.
func checkSyntax(templatePath string, out []byte) error {
	if isYAMLTemplate(templatePath) {
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

// executeTemplate runs text over params, a name params holds being known.
func executeTemplate(name, text string, params map[string]any) ([]byte, error) {
	out, _, err := executeTemplateFor(name, text, params, func(n string) bool { _, ok := params[n]; return ok })
	return out, err
}

// executeTemplateFor parses text, lists the parameters it reads that known does not define, and
// runs it with text/template's default options (a missing key prints "<no value>").
func executeTemplateFor(name, text string, params map[string]any, known func(string) bool) ([]byte, []UnknownParam, error) {
	t, err := template.New(name).Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap template %s: %w", name, err)
	}
	unknown := unknownParams(t, known)
	var out bytes.Buffer
	out.Grow(len(text) + len(text)/4) // the output is about the template's size: one allocation, not a doubling series
	if err := t.Execute(&out, params); err != nil {
		return nil, unknown, fmt.Errorf("bootstrap template %s: %w", name, err)
	}
	return out.Bytes(), unknown, nil
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// addressJSON is Istio's addressConverter: host:port to a socket_address body, in its spacing.
func addressJSON(sa *SocketAddress) string {
	return fmt.Sprintf(`{"address": "%s", "port_value": %d}`, sa.Address, sa.PortValue)
}

// templateParams builds the map Istio's agent passes its templates (toTemplateParams in
// pkg/bootstrap/config.go, option/instances.go), for the stamped release (st.release): the
// release's names only, each present exactly when that release's agent sets it (a name Istio
// skips when zero, newOptionOrSkipIfZero, is left out, so a template reading it gets what
// text/template gives for a missing key, as with Istio), with Istio's value forms. The names and
// rules were read at each release's tag; PARITY.md and docs/compat.md cite them.
func (st *state) templateParams(ctx context.Context) (map[string]any, error) {
	rel := st.release
	runtime, err := toJSON(st.runtimeFlags())
	if err != nil {
		return nil, err
	}
	stats, err := st.statsConfig()
	if err != nil {
		return nil, err
	}
	xdsRoot, _ := environ.Lookup(st.cfg.Env, "XDS_ROOT_CA") // agent.go: XDSRootCert is XDS_ROOT_CA as given
	p := map[string]any{
		// Set unconditionally (newOption) at every supported tag.
		"nodeID":                        st.nodeID,
		"nodeType":                      string(st.cfg.NodeType),
		"pilot_SAN":                     sanMatchers(st.meta.PilotSubjectAltName),
		"log_json":                      st.cfg.LogAsJSON,
		"discovery_host":                discoveryHost(st.pc.GetDiscoveryAddress()),
		"metadata":                      st.meta,
		"xds_type":                      st.xdsType,
		"metadata_discovery":            st.discovery,
		"metrics_localhost_access_only": st.pc.GetProxyMetadata()["METRICS_LOCALHOST_ACCESS_ONLY"] == "true",
		"workload_identity_socket_file": st.meta.WorkloadIdentitySocketFile,
		"localhost":                     st.localhost,
		"wildcard":                      st.wildcard,
		"dns_lookup_family":             st.dnsFamily,
		"meta_json_str":                 string(st.metaJSON),
		"runtime_flags":                 runtime,
		"envoy_status_port":             st.cfg.EnvoyStatusPort,
		"envoy_prometheus_port":         st.cfg.EnvoyPrometheusPort,
		"config":                        st.pc,
		"cluster":                       st.cluster,
		"discovery_address":             st.pc.GetDiscoveryAddress(),
		"xds_root_cert":                 xdsRoot,
		"histogram_buckets":             histogramBuckets(stats.HistogramBucketSettings),
	}
	// Skipped when zero (newOptionOrSkipIfZero / skipOption) or set only on a condition.
	setIf := func(name string, v any, ok bool) {
		if ok {
			p[name] = v
		}
	}
	setIf("region", st.locality.Region, st.locality.Region != "")
	setIf("zone", st.locality.Zone, st.locality.Zone != "")
	setIf("sub_zone", st.locality.SubZone, st.locality.SubZone != "")
	setIf("outlier_log_path", st.cfg.OutlierLogPath, st.cfg.OutlierLogPath != "")
	setIf("custom_file_path", DefaultCredentialFilesSocket, st.cfg.FileCredential) // option.CustomFileSDSPath
	if n, ok := st.cfg.PlatformMetadata["gcp_project_number"]; ok {
		p["gcp_project_number"] = n
	}
	if st.cfg.STSPort > 0 {
		p["sts"], p["sts_port"] = true, st.cfg.STSPort
		if id, ok := st.cfg.PlatformMetadata["gcp_project"]; ok {
			p["gcp_project_id"] = id
		}
	}
	if st.additional != "" { // dual stack on, both families: config.go's ISTIO_DUAL_STACK branch
		p["additional_localhost"], p["additional_wildcard"], p["dual_stack"] = st.family.AdditionalLocalhost, st.additional, true
	}
	setIf("envoy_status_port_enable_proxy_protocol", true, st.cfg.StatusPortProxyProtocol)
	if s, ok := st.meta.Raw["LOAD_STATS_CONFIG_JSON"].(string); ok {
		p["load_stats_config_json_str"] = s
	}
	if st.pc.GetDiscoveryAddress() != "" {
		if sa, err := st.hostPort("discoveryAddress", st.pc.GetDiscoveryAddress()); err == nil {
			p["pilot_grpc_address"] = addressJSON(sa)
		}
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
	setIf("inclusionPrefix", prefixes, len(prefixes) > 0)
	setIf("inclusionSuffix", suffixes, len(suffixes) > 0)
	setIf("inclusionRegexps", regexps, len(regexps) > 0)
	setIf("extraStatTags", tags, len(tags) > 0)
	if flush, ok := st.statsFlushParam(); ok {
		p["stats_flush_interval"] = flush
	}
	if evict, ok := st.statsEvictionParam(); ok {
		p["stats_eviction_interval"] = evict
	}

	// Release-specific names (option/instances.go and config.go at each tag).
	if rel < Release129 {
		p["stats_compression"] = st.statsCompressionAnnotation()
	} else {
		p["envoy_metrics_stats_compression"] = st.statsCompressed()
		p["global_downstream_max_connections"] = int(st.globalDownstreamMaxConnections())
	}
	if rel >= Release131 {
		setIf("secure_metrics_port", st.cfg.EnvoySecureMetricsPort, st.cfg.EnvoySecureMetricsPort != 0)
		setIf("secure_merged_metrics_port", st.cfg.EnvoySecureMergedMetricsPort, st.cfg.EnvoySecureMergedMetricsPort != 0)
		setIf("enable_self_discovery", true, st.selfDiscovery())
	}

	if err := st.tracingParams(p); err != nil {
		return nil, err
	}
	if st.pc.GetStatsdUdpAddress() != "" {
		sa, err := st.statsdAddress(ctx)
		if err != nil {
			return nil, err
		}
		if sa != nil {
			p["statsd"] = addressJSON(sa)
		}
	}
	// getProxyConfigOptions: a service's address, TLS and keepalive each set when given.
	for _, svc := range []struct {
		key, field string
		rs         *meshapi.RemoteService
	}{
		{"envoy_metrics_service", "envoyMetricsService", st.pc.GetEnvoyMetricsService()},
		{"envoy_accesslog_service", "envoyAccessLogService", st.pc.GetEnvoyAccessLogService()},
	} {
		if svc.rs.GetAddress() == "" {
			continue
		}
		c, err := st.remoteServiceCluster(svc.key, svc.field, svc.rs)
		if err != nil {
			return nil, err
		}
		p[svc.key+"_address"] = addressJSON(c.LoadAssignment.Endpoints[0].LbEndpoints[0].Endpoint.Address.SocketAddress)
		if svc.rs.GetTlsSettings() != nil {
			p[svc.key+"_tls"] = ""
			if c.TransportSocket != nil {
				if p[svc.key+"_tls"], err = toJSON(c.TransportSocket); err != nil {
					return nil, err
				}
			}
		}
		if c.UpstreamConnectionOptions != nil {
			if p[svc.key+"_tcp_keepalive"], err = toJSON(c.UpstreamConnectionOptions); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// tracingParams adds the tracer's parameters (getProxyConfigOptions): the collector address of
// the tracer chosen, tracing_tls whenever tlsSettings is given ("" for DISABLE, as
// transportSocketConverter gives), the Lightstep token path, Stackdriver's settings with Istio's
// default of 200 for each unset limit.
func (st *state) tracingParams(p map[string]any) error {
	t := st.pc.GetTracing()
	if t == nil {
		return nil
	}
	tr, cl, err := st.tracing()
	if err != nil {
		return err
	}
	if tr != nil {
		addr := addressJSON(cl.LoadAssignment.Endpoints[0].LbEndpoints[0].Endpoint.Address.SocketAddress)
		switch cl.Name {
		case "zipkin":
			p["zipkin"] = addr
		case "lightstep":
			p["lightstep"], p["lightstepToken"] = addr, st.LightstepTokenPath()
		case "datadog_agent":
			p["datadog"] = addr
		}
	}
	if sd, ok := t.GetTracer().(*meshapi.Tracing_Stackdriver_); ok {
		p["stackdriver"] = true
		p["stackdriverProjectID"] = st.cfg.PlatformMetadata["gcp_project"]
		p["stackdriverDebug"] = sd.Stackdriver.GetDebug()
		orDefault := func(v interface{ GetValue() int64 }, isNil bool) int64 {
			if isNil {
				return 200
			}
			return v.GetValue()
		}
		p["stackdriverMaxAnnotations"] = orDefault(sd.Stackdriver.GetMaxNumberOfAnnotations(), sd.Stackdriver.GetMaxNumberOfAnnotations() == nil)
		p["stackdriverMaxAttributes"] = orDefault(sd.Stackdriver.GetMaxNumberOfAttributes(), sd.Stackdriver.GetMaxNumberOfAttributes() == nil)
		p["stackdriverMaxEvents"] = orDefault(sd.Stackdriver.GetMaxNumberOfMessageEvents(), sd.Stackdriver.GetMaxNumberOfMessageEvents() == nil)
	}
	if tls := t.GetTlsSettings(); tls != nil {
		ts := (*TypedExtension)(nil)
		if cl != nil {
			ts = cl.TransportSocket
		} else {
			// A tracer without a cluster (Stackdriver, none): Istio converts the settings all
			// the same (TracingTLS, isH2 false), and its template does not use them; settings
			// Wingman refuses for a cluster (see PARITY.md 7) then leave the parameter "".
			ts, _ = st.tlsTransportSocket(tls, "tracer", "tracing.tlsSettings", false)
		}
		p["tracing_tls"] = ""
		if ts != nil {
			s, err := toJSON(ts)
			if err != nil {
				return err
			}
			p["tracing_tls"] = s
		}
	}
	return nil
}

// histogramBucket is option.HistogramBucket's JSON form (match.prefix, buckets).
type histogramBucket struct {
	Match struct {
		Prefix string `json:"prefix"`
	} `json:"match"`
	Buckets []float64 `json:"buckets"`
}

// histogramBuckets is the histogram_buckets parameter: a nil slice without the annotation, as
// Istio's getStatsOptions passes it (newOption, so always present).
func histogramBuckets(in []HistogramBucketSettings) []histogramBucket {
	var out []histogramBucket
	for _, b := range in {
		var h histogramBucket
		h.Match.Prefix, h.Buckets = b.Match.Prefix, b.Buckets
		out = append(out, h)
	}
	return out
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
	if rel, ok := ReleaseOf(cfg.IstioVersion); !ok && cfg.Logger != nil {
		cfg.Logger.Warn("the stamped Istio version is not a supported release; following the nearest one",
			"istioVersion", cfg.IstioVersion, "release", rel.String(), "supported", OldestRelease.String()+" .. "+NewestRelease.String())
	}
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

// dropTrailingCommas removes a comma that closes an object or array (`, }` or `, ]`), outside
// strings. Istio's own template writes one (the status listener's proxy_protocol filter, at every
// supported tag) and Envoy reads it: protobuf's JSON parser, which Envoy runs with
// allow_legacy_syntax, accepts trailing commas (json/internal/lexer.h VisitObject, VisitArray).
// Dropping it gives the same message as strict JSON, which the checks and override merge read.
func dropTrailingCommas(in []byte) []byte {
	var out []byte // nil until the first comma to drop: most output has none
	inString, escaped := false, false
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ',':
			j := i + 1
			for j < len(in) && (in[j] == ' ' || in[j] == '\t' || in[j] == '\n' || in[j] == '\r') {
				j++
			}
			if j < len(in) && (in[j] == '}' || in[j] == ']') {
				if out == nil {
					out = append(make([]byte, 0, len(in)), in[:i]...)
				}
				continue
			}
		}
		if out != nil {
			out = append(out, c)
		}
	}
	if out == nil {
		return in
	}
	return out
}
