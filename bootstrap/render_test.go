package bootstrap

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wingman-mesh/wingman/bootstrap/envoyproto"
	"github.com/wingman-mesh/wingman/bootstrap/proxyconfig"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

// baseConfig is a sidecar as the injector starts it, with downward-API files in a temp dir.
func baseConfig(t testing.TB) Config {
	t.Helper()
	dir := t.TempDir()
	labels := filepath.Join(dir, "labels")
	ann := filepath.Join(dir, "annotations")
	must(t, os.WriteFile(labels, []byte("app=\"reviews\"\npod-template-hash=\"abc\"\nversion=\"v1\"\nservice.istio.io/canonical-name=\"reviews\"\n"), 0o600))
	must(t, os.WriteFile(ann, []byte("kubectl.kubernetes.io/default-container=\"reviews\"\n"), 0o600))
	c := NewConfig()
	c.IPs = []string{"10.0.0.5"}
	c.PodName = "reviews-v1-7d9"
	c.PodNamespace = "default"
	c.ServiceAccount = "bookinfo-reviews"
	c.ProxyConfig = proxyconfig.Default()
	c.IstioVersion = "1.32.0" // the newest supported release (master), which the built-in render follows
	c.LabelsFile, c.AnnotationsFile = labels, ann
	c.Env = []string{
		"PATH=/usr/bin",
		"ISTIO_META_CLUSTER_ID=Kubernetes",
		"ISTIO_META_MESH_ID=cluster.local",
		"ISTIO_META_WORKLOAD_NAME=reviews-v1",
		"ISTIO_META_INTERCEPTION_MODE=REDIRECT",
		"ISTIO_META_APP_CONTAINERS=reviews",
		"ISTIO_META_OWNER=kubernetes://apis/apps/v1/namespaces/default/deployments/reviews-v1",
		`ISTIO_META_POD_PORTS=[{"containerPort":9080,"protocol":"TCP"}]`,
		"ISTIO_META_NODE_NAME=node-1",
		"HOST_IP=192.168.1.10",
	}
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func goldenCases(t testing.TB) map[string]Config {
	cases := map[string]Config{}
	cases["defaults"] = baseConfig(t)

	c := baseConfig(t)
	c.IPs = []string{"fd00::5"}
	cases["ipv6"] = c

	c = baseConfig(t)
	c.IPs = []string{"10.0.0.5", "fd00::5"}
	c.DualStack = true
	cases["dual_stack"] = c

	c = baseConfig(t)
	c.Env = append(c.Env, "ISTIO_META_DNS_CAPTURE=true", "ISTIO_META_DNS_AUTO_ALLOCATE=true", "DNS_PROXY_ADDR=localhost:15053")
	cases["dns_capture"] = c

	c = baseConfig(t)
	c.ProxyConfig.Tracing = &meshapi.Tracing{Tracer: &meshapi.Tracing_Zipkin_{Zipkin: &meshapi.Tracing_Zipkin{Address: "zipkin.istio-system:9411"}}}
	cases["tracing_zipkin"] = c

	c = baseConfig(t)
	c.ProxyConfig.Tracing = &meshapi.Tracing{
		Tracer:      &meshapi.Tracing_Lightstep_{Lightstep: &meshapi.Tracing_Lightstep{Address: "lightstep-satellite:443", AccessToken: "tok"}},
		TlsSettings: &meshapi.ClientTLSSettings{Mode: meshapi.ClientTLSSettings_ISTIO_MUTUAL},
	}
	cases["tracing_lightstep"] = c

	c = baseConfig(t)
	c.ProxyConfig.Tracing = &meshapi.Tracing{Tracer: &meshapi.Tracing_Datadog_{Datadog: &meshapi.Tracing_Datadog{Address: "$(HOST_IP):8126"}}}
	cases["tracing_datadog"] = c

	c = baseConfig(t)
	c.ProxyConfig.Tracing = &meshapi.Tracing{}
	cases["tracing_none"] = c

	c = baseConfig(t)
	c.ProxyConfig.ProxyStatsMatcher = &meshapi.ProxyConfig_ProxyStatsMatcher{
		InclusionPrefixes: []string{"cluster.outbound", "upstream_cx_{pod_ip}"},
		InclusionSuffixes: []string{"upstream_rq_timeout"},
		InclusionRegexps:  []string{`http\.[0-9]*\.downstream_rq_time`},
	}
	c.ProxyConfig.ExtraStatTags = []string{"request_host", "destination_port"}
	c.ProxyConfig.StatsCompression = wrapperspb.Bool(false)
	c.ExitOnZeroActiveConnections = true
	must(t, os.WriteFile(c.AnnotationsFile, []byte(strings.Join([]string{
		`sidecar.istio.io/extraStatTags="request_host,request_protocol"`,
		`sidecar.istio.io/statsHistogramBuckets="{\"istiocustom\":[1,5,10],\"cluster_manager\":[1,2]}"`,
		`sidecar.istio.io/statsFlushInterval="10s"`,
		`sidecar.istio.io/statsEvictionInterval="60s"`,
	}, "\n")), 0o600))
	cases["stats_matchers"] = c

	c = baseConfig(t)
	c.Env = append(c.Env,
		`ISTIO_METAJSON_LABELS={"team":"payments","app":"overridden-by-file"}`,
		`ISTIO_METAJSON_EXTRA={"custom_key":"v","nested":{"a":1}}`,
		"ISTIO_META_REQUESTED_NETWORK_VIEW=net1,net2",
		"ISTIO_META_ENABLE_HBONE=true",
	)
	c.ProxyConfig.ProxyMetadata = map[string]string{"ISTIO_META_FROM_PROXY_METADATA": "pm", "ISTIO_META_CLUSTER_ID": "loses-to-env", "OTHER": "x"}
	c.ProxyConfig.RuntimeValues = map[string]string{"re2.max_program_size.error_level": "", "my.flag": "true", "my.value": "7"}
	c.PlatformMetadata = map[string]string{"gcp_project": "p1", "gcp_location": "us-central1"}
	c.PlatformLocality = "us-central1/us-central1-a"
	cases["custom_metadata"] = c

	c = baseConfig(t)
	c.NodeType = Router
	c.PodName = "istio-ingressgateway-5f9"
	c.PodNamespace = "istio-system"
	c.ProxyConfig.ClusterName = &meshapi.ProxyConfig_ServiceCluster{ServiceCluster: "istio-ingressgateway"}
	c.Delta = false
	c.StatusPortProxyProtocol = true
	c.LogAsJSON = true
	c.OutlierLogPath = "/dev/stdout"
	cases["router"] = c
	return cases
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./bootstrap/... -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run with -update if intended)\n got: %s", path, got)
	}
}

func TestGoldens(t *testing.T) {
	for name, cfg := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			got, err := Render(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name, got)
			for _, f := range envoyproto.Validate(got) {
				t.Errorf("Envoy validation: %s", f)
			}
		})
	}
}

// TestEveryGoldenValidates re-reads every committed golden (including template and override outputs).
func TestEveryGoldenValidates(t *testing.T) {
	files, err := filepath.Glob("testdata/*.golden.json")
	must(t, err)
	if len(files) < 12 {
		t.Fatalf("only %d goldens", len(files))
	}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "grpc") {
			continue
		}
		data, err := os.ReadFile(f)
		must(t, err)
		for _, fd := range envoyproto.Validate(data) {
			t.Errorf("%s: %s", f, fd)
		}
	}
}
