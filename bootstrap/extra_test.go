package bootstrap

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wingman-mesh/wingman/bootstrap/envoyproto"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

func TestCustomTemplate(t *testing.T) {
	cfg := baseConfig(t)
	cfg.ProxyConfig.Tracing = &meshapi.Tracing{Tracer: &meshapi.Tracing_Zipkin_{Zipkin: &meshapi.Tracing_Zipkin{Address: "zipkin.istio-system:9411"}}}
	cfg.ProxyConfig.ExtraStatTags = []string{"request_host"}
	got, err := RenderTemplate(t.Context(), cfg, "testdata/custom_template.tmpl.json")
	if err != nil {
		t.Fatal(err)
	}
	var pretty any
	if err := json.Unmarshal(got, &pretty); err != nil {
		t.Fatalf("template output is not JSON: %v\n%s", err, got)
	}
	out, _ := json.MarshalIndent(pretty, "", "  ")
	checkGolden(t, "custom_template", append(out, '\n'))
	for _, f := range envoyproto.Validate(got) {
		t.Errorf("Envoy validation: %s", f)
	}
}

func TestOverrideMerge(t *testing.T) {
	cfg := baseConfig(t)
	base, err := Render(t.Context(), cfg)
	must(t, err)
	over, err := LoadOverride("testdata/override.yaml", cfg.Env)
	must(t, err)
	if !strings.Contains(string(over), `"192.168.1.10"`) {
		t.Fatalf("$(HOST_IP) not substituted: %s", over)
	}
	merged, err := envoyproto.MergeOverride(base, over)
	must(t, err)
	checkGolden(t, "override", merged)
	for _, f := range envoyproto.Validate(merged) {
		t.Errorf("Envoy validation: %s", f)
	}
	var b Bootstrap
	must(t, json.Unmarshal(merged, &b))
	// Envoy's MergeFrom: the scalar port replaced, clusters appended, runtime layers appended.
	if b.Admin.Address.SocketAddress.PortValue != 15999 {
		t.Errorf("admin port = %d", b.Admin.Address.SocketAddress.PortValue)
	}
	if n := len(b.StaticResources.Clusters); n != 5 || b.StaticResources.Clusters[4].Name != "extra_collector" {
		t.Errorf("clusters not appended: %d", n)
	}
	if n := len(b.LayeredRuntime.Layers); n != 3 {
		t.Errorf("runtime layers = %d, want 3", n)
	}
}

// TestValidateCatchesDrift: a drifted override that renames xds-grpc is the classic crash loop.
func TestValidateCatchesDrift(t *testing.T) {
	base, err := Render(t.Context(), baseConfig(t))
	must(t, err)
	cases := map[string]struct {
		edit func(string) string
		path string
	}{
		"renamed xds cluster": {func(s string) string {
			return strings.Replace(s, `"name": "xds-grpc"`, `"name": "xds-grpc-old"`, 1)
		}, "dynamic_resources.ads_config.grpc_services[0].envoy_grpc.cluster_name"},
		"unknown field": {func(s string) string {
			return strings.Replace(s, `"use_all_default_tags": false`, `"use_all_default_tags": false, "bogus_field": 1`, 1)
		}, "stats_config.bogus_field"},
		"wrong type": {func(s string) string {
			return strings.Replace(s, `"max_requests_per_connection": 1`, `"max_requests_per_connection": "lots"`, 1)
		}, "max_requests_per_connection"},
		"duplicate cluster": {func(s string) string {
			return strings.Replace(s, `"name": "agent"`, `"name": "prometheus_stats"`, 1)
		}, "static_resources.clusters[1].name"},
		"undefined local cluster": {func(s string) string {
			return strings.Replace(s, `"overload_manager"`, `"cluster_manager": {"local_cluster_name": "local_cluster"}, "overload_manager"`, 1)
		}, "cluster_manager.local_cluster_name"},
		"listener route to a missing cluster": {func(s string) string {
			return strings.Replace(s, `"cluster": "prometheus_stats"`, `"cluster": "prometheus"`, 1)
		}, "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].route.cluster"},
		"statsd host name": {func(s string) string {
			return strings.Replace(s, `"overload_manager"`, `"stats_sinks": [{"name": "envoy.stat_sinks.statsd", "typed_config": {"@type": "type.googleapis.com/envoy.config.metrics.v3.StatsdSink", "address": {"socket_address": {"address": "statsd.example", "port_value": 8125}}}}], "overload_manager"`, 1)
		}, "stats_sinks[0].typed_config.address.socket_address.address"},
		"bad enum": {func(s string) string {
			return strings.Replace(s, `"api_type": "DELTA_GRPC"`, `"api_type": "DELTA"`, 1)
		}, "dynamic_resources.ads_config.api_type"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			edited := c.edit(string(base))
			if edited == string(base) {
				t.Fatal("edit did not apply")
			}
			fs := envoyproto.Validate([]byte(edited))
			found := false
			for _, f := range fs {
				if strings.Contains(f.Path, c.path) {
					found = true
				}
			}
			if !found {
				t.Errorf("no finding at %s; got %v", c.path, fs)
			}
		})
	}
}

// TestNodeReadBackAsIstiod parses the node id and metadata the way Istiod does.
func TestNodeReadBackAsIstiod(t *testing.T) {
	cfg := goldenCases(t)["custom_metadata"]
	cfg.Env = append(cfg.Env, "ISTIO_META_DNS_CAPTURE=true")
	out, err := Render(t.Context(), cfg)
	must(t, err)
	var b struct {
		Node struct {
			ID       string          `json:"id"`
			Metadata json.RawMessage `json:"metadata"`
		} `json:"node"`
	}
	must(t, json.Unmarshal(out, &b))
	id, err := ParseNodeID(b.Node.ID)
	must(t, err)
	if id.Type != Sidecar || id.IP != "10.0.0.5" || id.ID != "reviews-v1-7d9.default" || id.DNSDomain != "default.svc.cluster.local" {
		t.Errorf("node id fields %+v", id)
	}
	var m Metadata
	must(t, json.Unmarshal(b.Node.Metadata, &m))
	checks := map[string]bool{
		"INSTANCE_IPS":              len(m.InstanceIPs) == 1 && m.InstanceIPs[0] == "10.0.0.5",
		"CLUSTER_ID env wins":       m.ClusterID == "Kubernetes",
		"MESH_ID":                   m.MeshID == "cluster.local",
		"NAMESPACE":                 m.Namespace == "default",
		"NAME":                      m.InstanceName == "reviews-v1-7d9",
		"DNS_CAPTURE":               bool(m.DNSCapture),
		"ENABLE_HBONE":              bool(m.EnableHBONE),
		"METADATA_DISCOVERY":        m.MetadataDiscovery != nil && bool(*m.MetadataDiscovery),
		"REQUESTED_NETWORK_VIEW":    len(m.RequestedNetworkView) == 2,
		"POD_PORTS":                 len(m.PodPorts) == 1 && m.PodPorts[0].ContainerPort == 9080,
		"PROXY_CONFIG":              m.ProxyConfig != nil && m.ProxyConfig.GetStatusPort() == 15020,
		"LABELS file over METAJSON": m.Labels["app"] == "reviews" && m.Labels["team"] == "payments",
		"pod-template-hash dropped": m.Labels["pod-template-hash"] == "",
		"PILOT_SAN":                 len(m.PilotSubjectAltName) == 1 && m.PilotSubjectAltName[0] == "istiod.istio-system.svc",
		"ISTIO_VERSION":             m.IstioVersion == "1.32.0",
		"PLATFORM_METADATA":         m.PlatformMetadata["gcp_project"] == "p1",
		"raw METAJSON key":          m.Raw["custom_key"] == "v",
		"raw proxyMetadata key":     m.Raw["FROM_PROXY_METADATA"] == "pm",
		"string port encoding":      m.Raw["ENVOY_STATUS_PORT"] == float64(15021),
		"string bool encoding":      m.Raw["DNS_CAPTURE"] == "true",
	}
	for k, ok := range checks {
		if !ok {
			t.Errorf("%s wrong; metadata %s", k, b.Node.Metadata)
		}
	}
}

func TestBadInput(t *testing.T) {
	cases := map[string]struct {
		edit func(*Config)
		want []string
	}{
		"bad IP":        {func(c *Config) { c.IPs = []string{"10.0.0.300"} }, []string{"IPs[0]", "10.0.0.300"}},
		"no IP":         {func(c *Config) { c.IPs = nil }, []string{"IPs"}},
		"bad node type": {func(c *Config) { c.NodeType = "gateway" }, []string{"node type"}},
		"metadata type": {func(c *Config) { c.Env = append(c.Env, "ISTIO_META_ENVOY_STATUS_PORT=abc") }, []string{"ENVOY_STATUS_PORT", "ISTIO_META_ENVOY_STATUS_PORT"}},
		"bad POD_PORTS": {func(c *Config) { c.Env = append([]string{"ISTIO_META_POD_PORTS=notjson"}, c.Env...) }, []string{"POD_PORTS"}}, // first entry wins
		"bad METAJSON":  {func(c *Config) { c.Env = append(c.Env, "ISTIO_METAJSON_LABELS={bad") }, []string{"ISTIO_METAJSON_LABELS"}},
		"bad tracer addr": {func(c *Config) {
			c.ProxyConfig.Tracing = &meshapi.Tracing{Tracer: &meshapi.Tracing_Zipkin_{Zipkin: &meshapi.Tracing_Zipkin{Address: "nozipkinport"}}}
		}, []string{"tracing.zipkin.address"}},
		"stackdriver without project": {func(c *Config) {
			c.ProxyConfig.Tracing = &meshapi.Tracing{Tracer: &meshapi.Tracing_Stackdriver_{Stackdriver: &meshapi.Tracing_Stackdriver{}}}
		}, []string{"tracing.stackdriver"}},
		"bad labels file": {func(c *Config) { must(t, os.WriteFile(c.LabelsFile, []byte("garbage"), 0o600)) }, []string{"labels", "line 1"}},
		"bad histogram annotation": {func(c *Config) {
			must(t, os.WriteFile(c.AnnotationsFile, []byte(`sidecar.istio.io/statsHistogramBuckets="nope"`), 0o600))
		}, []string{"statsHistogramBuckets"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := baseConfig(t)
			c.edit(&cfg)
			_, err := Render(t.Context(), cfg)
			if err == nil {
				t.Fatal("want error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestGRPCBootstrap(t *testing.T) {
	dir := t.TempDir()
	cfg := baseConfig(t)
	cfg.XDSSocket = "/etc/istio/proxy/XDS"
	certs := filepath.Join(dir, "certs")
	path := filepath.Join(dir, "proxy", "grpc-bootstrap.json")
	must(t, WriteGRPCBootstrap(path, cfg, certs))
	data, err := os.ReadFile(path)
	must(t, err)
	checkGolden(t, "grpc_bootstrap", []byte(strings.ReplaceAll(string(data), certs, "/certs")))
	b, err := ParseGRPCBootstrap(data)
	must(t, err)
	var gm Metadata
	must(t, json.Unmarshal(b.Node.Metadata, &gm))
	if b.XDSServers[0].ServerURI != "unix:///etc/istio/proxy/XDS" || gm.Generator != "grpc" || !strings.HasPrefix(b.Node.ID, "sidecar~10.0.0.5~") {
		t.Errorf("gRPC bootstrap: %s", data)
	}
	if err := ProbeGRPCBootstrap(path); err == nil || !strings.Contains(err.Error(), "cert-chain.pem") {
		t.Fatalf("probe before certs: %v", err)
	}
	must(t, os.MkdirAll(certs, 0o700))
	for _, f := range []string{"cert-chain.pem", "key.pem", "root-cert.pem"} {
		must(t, os.WriteFile(filepath.Join(certs, f), []byte("x"), 0o600))
	}
	must(t, ProbeGRPCBootstrap(path))
	if _, err := ParseGRPCBootstrap([]byte(`{"xds_servers":[]}`)); err == nil {
		t.Error("empty servers accepted")
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "envoy-rev.json")
	must(t, WriteFile(p, []byte("one"), 0o644))
	must(t, WriteFile(p, []byte("two"), 0o644))
	got, err := os.ReadFile(p)
	must(t, err)
	st, err := os.Stat(p)
	must(t, err)
	if string(got) != "two" || st.Mode().Perm() != 0o644 {
		t.Errorf("got %q mode %v", got, st.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}
	if di, _ := os.Stat(filepath.Dir(p)); di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", di.Mode())
	}
}

func BenchmarkRender(b *testing.B) {
	cfg := baseConfig(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(b.Context(), cfg); err != nil {
			b.Fatal(err)
		}
	}
}
