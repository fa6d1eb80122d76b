package proxyconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsWhenNothingGiven(t *testing.T) {
	pc, err := LoadProxyConfig(filepath.Join(t.TempDir(), "absent-mesh"), "", filepath.Join(t.TempDir(), "absent-ann"))
	if err != nil {
		t.Fatal(err)
	}
	if pc.GetConfigPath() != "./etc/istio/proxy" || pc.GetProxyAdminPort() != 15000 || pc.GetStatusPort() != 15020 ||
		pc.GetDiscoveryAddress() != "istiod.istio-system.svc:15012" || pc.GetServiceCluster() != "istio-proxy" ||
		pc.GetDrainDuration().AsDuration() != 45*time.Second || pc.GetTerminationDrainDuration().AsDuration() != 5*time.Second ||
		pc.GetStatNameLength() != 189 || pc.GetBinaryPath() != "/usr/local/bin/envoy" || pc.GetControlPlaneAuthPolicy().String() != "MUTUAL_TLS" {
		t.Fatalf("defaults wrong: %v", pc)
	}
}

func TestPrecedence(t *testing.T) {
	mesh := writeFile(t, "mesh", `
defaultConfig:
  discoveryAddress: mesh-istiod:15012
  statusPort: 15021
  concurrency: 2
  proxyMetadata:
    A: mesh
    B: mesh
  tracing:
    zipkin:
      address: zipkin.mesh:9411
    sampling: 10
`)
	env := `{"statusPort": 15030, "proxyMetadata": {"B": "env", "C": "env"}, "tracing": {"sampling": 50}}`
	ann := writeFile(t, "annotations", strings.Join([]string{
		`proxy.istio.io/config="concurrency: 4\nproxyMetadata:\n  C: ann\n"`,
		`sidecar.istio.io/discoveryAddress="ann-istiod:15012"`,
		`status.sidecar.istio.io/port="15040"`,
		`other="x"`,
	}, "\n"))
	pc, err := LoadProxyConfig(mesh, env, ann)
	if err != nil {
		t.Fatal(err)
	}
	if got := pc.GetDiscoveryAddress(); got != "ann-istiod:15012" {
		t.Errorf("discoveryAddress = %q", got)
	}
	if got := pc.GetStatusPort(); got != 15040 {
		t.Errorf("statusPort = %d", got)
	}
	if got := pc.GetConcurrency().GetValue(); got != 4 {
		t.Errorf("concurrency = %d", got)
	}
	want := map[string]string{"A": "mesh", "B": "env", "C": "ann"}
	for k, v := range want {
		if pc.GetProxyMetadata()[k] != v {
			t.Errorf("proxyMetadata[%s] = %q, want %q (all %v)", k, pc.GetProxyMetadata()[k], v, pc.GetProxyMetadata())
		}
	}
	// A field a layer sets replaces the one below whole, nested messages included: tracing is
	// PROXY_CONFIG's {sampling: 50}, the mesh file's zipkin gone. Istio's MergeProxyConfig
	// (pkg/config/mesh/mesh.go) applies the layer with golang/protobuf v1.5.4's jsonpb, whose
	// unmarshalMessage sets each present field from a new value (decode.go, m.NewField then
	// m.Set; wrapJSONUnmarshalV2 is false); Istio's agent at 1.28.10 .. master gave exactly this
	// side by side (bootstrap/SIDE_BY_SIDE.md, mesh_file_and_annotation).
	if pc.GetTracing().GetSampling() != 50 || pc.GetTracing().GetTracer() != nil {
		t.Errorf("tracing = %v, want PROXY_CONFIG's whole", pc.GetTracing())
	}
	// Untouched defaults survive.
	if pc.GetProxyAdminPort() != 15000 {
		t.Errorf("proxyAdminPort = %d", pc.GetProxyAdminPort())
	}
}

// TestProxyHeadersCorrected: Istio's correctProxyHeaders (pkg/config/mesh/mesh.go, identical
// 1.28.10 .. master): a layer's proxyHeaders replaces the one below, but forwardedClientCert,
// requestId, attemptCount, server and envoyDebugHeaders it leaves unset keep the value below;
// any other field (here preserveHttp1HeaderCase) does not.
func TestProxyHeadersCorrected(t *testing.T) {
	pc, err := LoadProxyConfig("", `{"proxyHeaders": {"forwardedClientCert": "SANITIZE", "server": {"disabled": true},
		"requestId": {"disabled": true}, "attemptCount": {"disabled": true}, "envoyDebugHeaders": {"disabled": true},
		"preserveHttp1HeaderCase": true}}`, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := applyLayer(pc, []byte(`proxyHeaders: {server: {value: "mine"}}`), "test", nil, nil); err != nil {
		t.Fatal(err)
	}
	ph := pc.GetProxyHeaders()
	if ph.GetServer().GetValue() != "mine" || ph.GetServer().GetDisabled().GetValue() ||
		ph.GetForwardedClientCert().String() != "SANITIZE" || !ph.GetRequestId().GetDisabled().GetValue() ||
		!ph.GetAttemptCount().GetDisabled().GetValue() || !ph.GetEnvoyDebugHeaders().GetDisabled().GetValue() ||
		ph.GetPreserveHttp1HeaderCase() != nil {
		t.Errorf("proxyHeaders = %v", ph)
	}
}

func TestOneofReplaced(t *testing.T) {
	pc, err := LoadProxyConfig("", `{"tracing":{"zipkin":{"address":"z:9411"}}}`, "")
	if err != nil {
		t.Fatal(err)
	}
	base := pc
	if err := applyLayer(base, []byte(`tracing: {datadog: {address: "dd:8126"}}`), "test", nil, nil); err != nil {
		t.Fatal(err)
	}
	if base.GetTracing().GetZipkin() != nil || base.GetTracing().GetDatadog().GetAddress() != "dd:8126" {
		t.Fatalf("tracer oneof not replaced: %v", base.GetTracing())
	}
}

func TestUnknownFieldTolerated(t *testing.T) {
	pc, err := LoadProxyConfig("", `{"someFutureField": 3, "statusPort": 15099}`, "")
	if err != nil {
		t.Fatalf("unknown field should be tolerated like Istio: %v", err)
	}
	if pc.GetStatusPort() != 15099 {
		t.Fatalf("statusPort = %d", pc.GetStatusPort())
	}
}

func TestBadInputNamesSourceAndField(t *testing.T) {
	dir := t.TempDir()
	badMesh := filepath.Join(dir, "mesh")
	if err := os.WriteFile(badMesh, []byte("defaultConfig:\n  proxyAdminPort: notanumber\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badAnn := filepath.Join(dir, "annotations")
	if err := os.WriteFile(badAnn, []byte("a=\"ok\"\nbroken line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badAnnValue := filepath.Join(dir, "annotations2")
	if err := os.WriteFile(badAnnValue, []byte(`proxy.istio.io/config="statusPort: [1]"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badStatus := filepath.Join(dir, "annotations3")
	if err := os.WriteFile(badStatus, []byte(`status.sidecar.istio.io/port="99999"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, mesh, env, ann string
		want                 []string
	}{
		{"malformed PROXY_CONFIG", "", `{"statusPort": `, "", []string{"PROXY_CONFIG"}},
		{"PROXY_CONFIG wrong type", "", `statusPort: abc`, "", []string{"PROXY_CONFIG", "statusPort"}},
		{"PROXY_CONFIG bad port", "", `proxyAdminPort: 70000`, "", []string{"PROXY_CONFIG", "proxyAdminPort"}},
		{"PROXY_CONFIG bad discovery", "", `discoveryAddress: nocolon`, "", []string{"PROXY_CONFIG", "discoveryAddress"}},
		{"PROXY_CONFIG unknown tracer", "", `tracing: {jaeger: {address: "j:1"}}`, "", []string{"PROXY_CONFIG"}},
		{"PROXY_CONFIG two unknown tracers, in order", "", `tracing: {jaeger: {}, foo: {}}`, "", []string{"PROXY_CONFIG", "fields tracing.foo, tracing.jaeger:"}},
		{"PROXY_CONFIG bad zipkin", "", `tracing: {zipkin: {address: "zipkin"}}`, "", []string{"PROXY_CONFIG", "tracing.zipkin.address"}},
		{"mesh config", badMesh, "", "", []string{badMesh, "proxyAdminPort"}},
		{"annotations file", "", "", badAnn, []string{badAnn, "line 2"}},
		{"annotation value", "", "", badAnnValue, []string{badAnnValue, AnnotationProxyConfig, "statusPort"}},
		{"status annotation", "", "", badStatus, []string{badStatus, AnnotationStatusPort, "statusPort"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadProxyConfig(c.mesh, c.env, c.ann)
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

func TestParsePodInfo(t *testing.T) {
	m, err := ParsePodInfo([]byte("app=\"reviews\"\n\nversion=\"v1\"\nsidecar.istio.io/status=\"{\\\"a\\\":1}\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m["app"] != "reviews" || m["version"] != "v1" || m["sidecar.istio.io/status"] != `{"a":1}` || len(m) != 3 {
		t.Fatalf("got %v", m)
	}
}
