package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wingman-mesh/wingman/bootstrap/envoyproto"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// parityCases are the input sets of TestTemplateParity: the golden cases plus one per feature.
func parityCases(t testing.TB) map[string]Config {
	cases := goldenCases(t)

	for _, nt := range []NodeType{Waypoint, Ztunnel, AgentGateway} {
		c := baseConfig(t)
		c.NodeType, c.Delta = nt, false // a waypoint still gets Delta xDS
		cases["node_"+string(nt)] = c
	}

	c := baseConfig(t)
	c.EnvoySecureMetricsPort, c.EnvoySecureMergedMetricsPort = 15091, 15092
	c.IPs, c.DualStack = []string{"10.0.0.5", "fd00::5"}, true
	cases["secure_metrics"] = c

	c = baseConfig(t)
	c.Env = append(c.Env, "ISTIO_META_ENABLE_SELF_DISCOVERY=true")
	cases["self_discovery"] = c

	c = baseConfig(t)
	c.ProxyConfig.EnvoyAccessLogService = &meshapi.RemoteService{
		Address:      "als.istio-system:15000",
		TlsSettings:  &meshapi.ClientTLSSettings{Mode: meshapi.ClientTLSSettings_ISTIO_MUTUAL},
		TcpKeepalive: &meshapi.ConnectionPoolSettings_TCPSettings_TcpKeepalive{Probes: 3, Time: durationpb.New(60e9), Interval: durationpb.New(10e9)},
	}
	c.ProxyConfig.EnvoyMetricsService = &meshapi.RemoteService{Address: "$(HOST_IP):15001"}
	cases["als_and_metrics_service"] = c

	c = baseConfig(t)
	c.ProxyConfig.StatsdUdpAddress = "localhost:8125"
	cases["statsd_by_name"] = c

	c = baseConfig(t)
	c.ProxyConfig.ConnectionSettings = &meshapi.ProxyConfig_ConnectionSettings{GlobalDownstreamConnectionLimit: wrapperspb.Int32(5000)}
	c.ProxyConfig.ProxyMetadata = map[string]string{"ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS": "100"}
	c.KeepFragmentInPath = true
	c.FIPS = true
	cases["connection_limit_and_runtime"] = c

	c = baseConfig(t)
	c.PlatformMetadata = map[string]string{"gcp_project": "p1", "gcp_project_number": "123", "gcp_location": "us-central1-a"}
	c.PlatformLocality = "us-central1/us-central1-a"
	c.STSPort = 15463
	c.FileCredential = true
	cases["platform_metadata"] = c
	return cases
}

// TestTemplateParity renders every input set twice: the typed bootstrap, and Wingman's own
// template over Istio's parameter names (testdata/every_param.tmpl.json), which rebuilds the
// bootstrap from the parameters alone. Both must be valid Envoy bootstraps and identical: any
// fact the typed render uses that the parameters do not carry shows up here.
func TestTemplateParity(t *testing.T) {
	for name, cfg := range parityCases(t) {
		t.Run(name, func(t *testing.T) {
			typed, err := Render(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := RenderTemplate(t.Context(), cfg, "testdata/every_param.tmpl.json")
			if err != nil {
				t.Fatal(err)
			}
			for what, doc := range map[string][]byte{"typed": typed, "template": tmpl} {
				for _, f := range envoyproto.Validate(doc) {
					t.Errorf("%s: Envoy validation: %s", what, f)
				}
			}
			var a, b map[string]any
			if err := json.Unmarshal(typed, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(tmpl, &b); err != nil {
				t.Fatalf("template output is not JSON: %v\n%s", err, tmpl)
			}
			for _, k := range sortedKeys(a, b) {
				if !reflect.DeepEqual(a[k], b[k]) {
					ja, _ := json.MarshalIndent(a[k], "", " ")
					jb, _ := json.MarshalIndent(b[k], "", " ")
					t.Errorf("%s differs\ntyped:    %s\ntemplate: %s", k, ja, jb)
				}
			}
		})
	}
}

func sortedKeys(ms ...map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// TestParityFeatures checks, per input set, the part of the bootstrap the feature is about.
func TestParityFeatures(t *testing.T) {
	cases := parityCases(t)
	doc := func(name string) map[string]any {
		t.Helper()
		out, err := Render(t.Context(), cases[name])
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		must(t, json.Unmarshal(out, &m))
		return m
	}
	get := func(m any, path ...any) any {
		for _, p := range path {
			switch k := p.(type) {
			case string:
				m = m.(map[string]any)[k]
			case int:
				m = m.([]any)[k]
			}
		}
		return m
	}
	clusterNames := func(m map[string]any) []string {
		var out []string
		for _, c := range get(m, "static_resources", "clusters").([]any) {
			out = append(out, c.(map[string]any)["name"].(string))
		}
		return out
	}
	if id := get(doc("node_waypoint"), "node", "id").(string); !strings.HasPrefix(id, "waypoint~") {
		t.Errorf("waypoint node id %s", id)
	}
	if api := get(doc("node_waypoint"), "dynamic_resources", "ads_config", "api_type"); api != "DELTA_GRPC" {
		t.Errorf("waypoint api_type %v", api)
	}
	if id := get(doc("node_ztunnel"), "node", "id").(string); !strings.HasPrefix(id, "ztunnel~") {
		t.Errorf("ztunnel node id %s", id)
	}
	sd := doc("self_discovery")
	if get(sd, "cluster_manager", "local_cluster_name") != "local_cluster" || !strings.Contains(strings.Join(clusterNames(sd), ","), "local_cluster") {
		t.Errorf("self discovery: %v %v", get(sd, "cluster_manager"), clusterNames(sd))
	}
	sm := doc("secure_metrics")
	ls := get(sm, "static_resources", "listeners").([]any)
	// envoy_bootstrap.json at 1.31.0-rc.0 and master: Prometheus, secure, secure merged, status.
	if len(ls) != 4 || get(ls[1], "name") != "0.0.0.0_15091" || get(ls[2], "name") != "0.0.0.0_15092" ||
		get(ls[2], "filter_chains", 0, "transport_socket", "typed_config", "require_client_certificate") != true {
		t.Errorf("secure listeners: %v", ls)
	}
	if names := strings.Join(clusterNames(doc("als_and_metrics_service")), ","); !strings.HasSuffix(names, "envoy_metrics_service,envoy_accesslog_service") {
		t.Errorf("clusters %s", names)
	}
	if a := get(doc("statsd_by_name"), "stats_sinks", 0, "typed_config", "address", "socket_address", "address"); a != "127.0.0.1" {
		t.Errorf("statsd address %v, want localhost resolved", a)
	}
	cl := doc("connection_limit_and_runtime")
	if v := get(cl, "overload_manager", "resource_monitors", 0, "typed_config", "max_active_downstream_connections"); v != 5000.0 {
		t.Errorf("connection limit %v", v)
	}
	if v := get(cl, "layered_runtime", "layers", 0, "static_layer", "envoy.reloadable_features.http_strip_fragment_from_path_unsafe_if_disabled"); v != "false" {
		t.Errorf("strip fragment flag %v", v)
	}
	pm := doc("platform_metadata")
	if get(pm, "node", "locality", "zone") != "us-central1-a" || get(pm, "node", "metadata", "PLATFORM_METADATA", "gcp_project") != "p1" {
		t.Errorf("platform: %v", get(pm, "node"))
	}
}

// TestBadTemplateAndStatsd: a template reading a parameter the release does not pass renders, the
// parameter as text/template renders a missing key ("<no value>"; Istio's instance.go sets no
// missingkey option), with exactly one warning naming it and its line however often it is read.
// (A statsd host that does not resolve: statsd_test.go.)
func TestBadTemplateAndStatsd(t *testing.T) {
	cfg := baseConfig(t)
	log, warnings := newWarnRecorder()
	cfg.Logger = log
	p := filepath.Join(t.TempDir(), "t.json")
	must(t, os.WriteFile(p, []byte("{\n\"x\": \"{{ .istio_future_param }}\", \"y\": \"{{ .istio_future_param }}\", \"id\": \"{{ .nodeID }}\"}"), 0o600))
	out, err := RenderTemplate(t.Context(), cfg, p)
	if err != nil {
		t.Fatalf("unknown parameter stopped the render: %v", err)
	}
	if !strings.Contains(string(out), `"x": "<no value>", "y": "<no value>", "id": "sidecar~`) {
		t.Errorf("render %s", out)
	}
	if n := strings.Count(warnings.String(), "level=WARN"); n != 1 || !strings.Contains(warnings.String(), "parameter=istio_future_param") || !strings.Contains(warnings.String(), ":2:") {
		t.Errorf("want one warning naming the parameter and line 2, got %d: %s", n, warnings)
	}
	unknown, err := TemplateUnknownParams(cfg, p)
	if err != nil || len(unknown) != 1 || unknown[0].Name != "istio_future_param" {
		t.Errorf("TemplateUnknownParams %+v %v", unknown, err)
	}
}

// TestStatsdLookupEndsWithCaller: the statsd host lookup is bounded by the caller's context, both
// for the typed render and for a template: with a DNS server that never answers and an hour's
// ResolveTimeout, a cancelled context ends the render with context.Canceled.
func TestStatsdLookupEndsWithCaller(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // reads queries, never answers
	must(t, err)
	defer silent.Close()
	cfg := baseConfig(t)
	cfg.ProxyConfig.StatsdUdpAddress = "statsd.example:8125"
	cfg.ResolveTimeout = time.Hour
	cfg.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", silent.LocalAddr().String())
	}}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Render(ctx, cfg); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "statsdUdpAddress") {
		t.Errorf("typed render: %v, want the statsd lookup cancelled", err)
	}
	if _, err := RenderTemplate(ctx, cfg, "testdata/every_param.tmpl.json"); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "statsdUdpAddress") {
		t.Errorf("template render: %v, want the statsd lookup cancelled", err)
	}
}

func BenchmarkRenderTemplate(b *testing.B) {
	cfg := baseConfig(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderTemplate(b.Context(), cfg, "testdata/every_param.tmpl.json"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTemplateOutputSyntax: a template whose output is not JSON (a missing key's <no value> where
// a value belongs) is refused naming the line; a trailing comma, which Envoy's parser accepts
// (protobuf's legacy syntax) and Istio's own template writes, is dropped; YAML templates are
// checked as YAML.
func TestTemplateOutputSyntax(t *testing.T) {
	cfg := baseConfig(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	must(t, os.WriteFile(bad, []byte("{\n\"a\": 1,\n\"b\": {{ .zipkin }}\n}"), 0o600))
	if _, err := RenderTemplate(t.Context(), cfg, bad); err == nil || !strings.Contains(err.Error(), "not JSON") || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("invalid JSON output: %v", err)
	}
	comma := filepath.Join(dir, "comma.json")
	must(t, os.WriteFile(comma, []byte("{\"a\": [1, 2, ],\n \"s\": \", }\", \"o\": {\"k\": true,\n }, }"), 0o600))
	if out, err := RenderTemplate(t.Context(), cfg, comma); err != nil || string(out) != "{\"a\": [1, 2 ],\n \"s\": \", }\", \"o\": {\"k\": true\n } }" {
		t.Errorf("trailing commas: %q %v", out, err)
	}
	y := filepath.Join(dir, "ok.yaml")
	must(t, os.WriteFile(y, []byte("node:\n  id: {{ .nodeID }}\n"), 0o600))
	if _, err := RenderTemplate(t.Context(), cfg, y); err != nil {
		t.Errorf("YAML template: %v", err)
	}
	must(t, os.WriteFile(y, []byte("node: [\n"), 0o600))
	if _, err := RenderTemplate(t.Context(), cfg, y); err == nil || !strings.Contains(err.Error(), "not YAML") {
		t.Errorf("invalid YAML output: %v", err)
	}
}

// TestWriteLightstepToken: the token lands where the rendered bootstrap points Envoy.
func TestWriteLightstepToken(t *testing.T) {
	cfg := goldenCases(t)["tracing_lightstep"]
	cfg.ProxyConfig.ConfigPath = t.TempDir()
	must(t, WriteLightstepToken(cfg.ProxyConfig))
	out, err := Render(t.Context(), cfg)
	must(t, err)
	var b struct {
		Tracing struct {
			HTTP struct {
				TypedConfig struct {
					File string `json:"access_token_file"`
				} `json:"typed_config"`
			} `json:"http"`
		} `json:"tracing"`
	}
	must(t, json.Unmarshal(out, &b))
	tok, err := os.ReadFile(b.Tracing.HTTP.TypedConfig.File)
	if err != nil || string(tok) != "tok" {
		t.Errorf("token file %s: %q %v", b.Tracing.HTTP.TypedConfig.File, tok, err)
	}
	must(t, WriteLightstepToken(baseConfig(t).ProxyConfig)) // no Lightstep: nothing to do
}

// TestEffectiveTemplatePath: Istio's precedence (instance.go GetEffectiveTemplatePath), ending at
// Istio's own template path.
func TestEffectiveTemplatePath(t *testing.T) {
	pc := &meshapi.ProxyConfig{ProxyBootstrapTemplatePath: "/etc/pc.tmpl"}
	for _, c := range []struct {
		env, flag string
		pc        *meshapi.ProxyConfig
		want      string
	}{
		{"/env.tmpl", "/flag.tmpl", pc, "/env.tmpl"},
		{"", "/flag.tmpl", pc, "/flag.tmpl"},
		{"", "", pc, "/etc/pc.tmpl"},
		{"", "", &meshapi.ProxyConfig{}, DefaultTemplatePath},
		{"", "", nil, DefaultTemplatePath},
		{"", "/var/lib/istio/envoy/envoy_bootstrap_tmpl.json", nil, "/var/lib/istio/envoy/envoy_bootstrap_tmpl.json"},
	} {
		if got := EffectiveTemplatePath(c.env, c.flag, c.pc); got != c.want {
			t.Errorf("%+v: got %q want %q", c, got, c.want)
		}
	}
}

// TestRenderEffective (issue 25 item 1): the template the image ships at Istio's own path is
// rendered, as Istio's agent renders it, so the bootstrap follows the image's Istio release; the
// typed render stands in only when the image has no template there; a custom template path
// without a file is an error naming it.
func TestRenderEffective(t *testing.T) {
	cfg := baseConfig(t)
	tmpl, err := os.ReadFile(filepath.Join("testdata", "every_param.tmpl.json"))
	must(t, err)
	t.Chdir(t.TempDir())
	typed, err := Render(t.Context(), cfg)
	must(t, err)
	got, err := RenderEffective(t.Context(), cfg, DefaultTemplatePath)
	must(t, err)
	if !bytes.Equal(got, typed) {
		t.Errorf("no template at %s: not the typed render", DefaultTemplatePath)
	}

	// An image template that differs from the typed render in one visible way: its output must
	// be what Envoy gets.
	shipped := bytes.Replace(tmpl, []byte(`"use_all_default_tags": false`), []byte(`"use_all_default_tags": true`), 1)
	if bytes.Equal(shipped, tmpl) {
		t.Fatal("every_param.tmpl.json no longer holds use_all_default_tags: false")
	}
	must(t, os.MkdirAll(filepath.Dir(DefaultTemplatePath), 0o755))
	must(t, os.WriteFile(DefaultTemplatePath, shipped, 0o644))
	got, err = RenderEffective(t.Context(), cfg, DefaultTemplatePath)
	must(t, err)
	var doc map[string]any
	must(t, json.Unmarshal(got, &doc))
	if v := at(doc, "stats_config", "use_all_default_tags"); v != true {
		t.Errorf("the image's template was not rendered: use_all_default_tags %v", v)
	}
	if want, err := RenderTemplate(t.Context(), cfg, DefaultTemplatePath); err != nil || !bytes.Equal(got, want) {
		t.Errorf("RenderEffective differs from rendering the template (%v)", err)
	}

	if _, err := RenderEffective(t.Context(), cfg, "/nonexistent/custom.tmpl"); err == nil || !strings.Contains(err.Error(), "/nonexistent/custom.tmpl") {
		t.Errorf("missing custom template: %v", err)
	}
}

// TestValidateSecureListenerSDS: the secure metrics listeners' SDS secrets come from sds-grpc; an
// override that renames the cluster leaves them dangling, and --validate says where.
func TestValidateSecureListenerSDS(t *testing.T) {
	cfg := baseConfig(t)
	cfg.EnvoySecureMetricsPort = 15091
	out, err := Render(t.Context(), cfg)
	must(t, err)
	if fs := envoyproto.Validate(out); len(fs) != 0 {
		t.Fatalf("clean render: %v", fs)
	}
	bad := strings.Replace(string(out), `"name": "sds-grpc"`, `"name": "sds-grpc-old"`, 1)
	found := false
	for _, f := range envoyproto.Validate([]byte(bad)) {
		if strings.HasPrefix(f.Path, "static_resources.listeners[1].filter_chains[0].transport_socket") {
			found = true
		}
	}
	if !found {
		t.Errorf("dangling SDS reference of the secure listener not reported: %v", envoyproto.Validate([]byte(bad)))
	}
}
