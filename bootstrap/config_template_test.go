package bootstrap

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// TestConfigTemplateMatchesIstio: a custom bootstrap template reads .config, which Istio's agent
// fills with istio.io/api's *meshconfig.ProxyConfig. Expressions over .config, with our template
// functions, must render the same (or fail alike) on our meshapi.ProxyConfig as on Istio's type:
// the expected output is what the same template gives over istio.io/api's generated type.
func TestConfigTemplateMatchesIstio(t *testing.T) {
	docs := []string{
		`{}`,
		`{"discoveryAddress": "istiod.istio-system.svc:15012", "concurrency": 2, "serviceCluster": "reviews",
		  "drainDuration": "45s", "proxyMetadata": {"B": "2", "A": "1"}, "controlPlaneAuthPolicy": "MUTUAL_TLS",
		  "tracing": {"zipkin": {"address": "zipkin:9411"}, "sampling": 12.5,
		    "customTags": {"t": {"literal": {"value": "v"}}}, "tlsSettings": {"mode": "ISTIO_MUTUAL", "sni": "x"}},
		  "proxyStatsMatcher": {"inclusionPrefixes": ["a", "b"]}, "holdApplicationUntilProxyStarts": true,
		  "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 3},
		  "image": {"imageType": "distroless"}, "interceptionMode": "TPROXY"}`,
		`{"tracingServiceName": "CANONICAL_NAME_AND_NAMESPACE", "tracing": {"lightstep": {"address": "l:443", "accessToken": "tok"}},
		  "envoyMetricsService": {"address": "m:15000", "tcpKeepalive": {"probes": 3, "time": "60s"}}}`,
	}
	exprs := []string{
		`{{ .config.DiscoveryAddress }}`, `{{ .config.Concurrency.Value }}`, `{{ .config.Concurrency }}`,
		`{{ .config.ProxyMetadata }}`, `{{ range $k, $v := .config.ProxyMetadata }}{{ $k }}={{ $v }},{{ end }}`,
		`{{ .config.Tracing.GetZipkin.Address }}`, `{{ .config.GetDrainDuration }}`, `{{ .config.DrainDuration.AsDuration }}`,
		`{{ .config.ControlPlaneAuthPolicy }}`, `{{ if eq .config.ControlPlaneAuthPolicy 1 }}mtls{{ end }}`,
		`{{ .config.GetServiceCluster }}`, `{{ .config.ClusterName.ServiceCluster }}`, `{{ .config.GetTracingServiceName }}`,
		`{{ .config.Tracing.GetSampling }}`, `{{ .config.Tracing.TlsSettings.Mode }}`, `{{ .config.Tracing.GetLightstep.AccessToken }}`,
		`{{ toJSON .config }}`, `{{ toJSON .config.Tracing }}`, `{{ toJson .config.ProxyStatsMatcher }}`, `{{ toPrettyJson .config.ReadinessProbe }}`,
		`{{ empty .config.Tracing }}`, `{{ default "none" .config.DiscoveryAddress }}`, `{{ .config.HoldApplicationUntilProxyStarts.GetValue }}`,
		`{{ .config.ReadinessProbe.GetHttpGet.Port }}`, `{{ .config.Image.ImageType }}`, `{{ .config.InterceptionMode }}`,
		`{{ .config.EnvoyMetricsService.TcpKeepalive.Probes }}`, `{{ .config.Tracing.CustomTags.t.GetLiteral.Value }}`,
		`{{ .config.Tracing }}`, `{{ .config.ReadinessProbe }}`,
	}
	for i, doc := range docs {
		theirs := &meshv1alpha1.ProxyConfig{}
		if err := protojson.Unmarshal([]byte(doc), theirs); err != nil {
			t.Fatal(err)
		}
		ours := &meshapi.ProxyConfig{}
		if err := meshapi.UnmarshalProtoJSON([]byte(doc), ours, protojson.UnmarshalOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, e := range exprs {
			want, errWant := executeTemplate("t", e, map[string]any{"config": theirs})
			got, errGot := executeTemplate("t", e, map[string]any{"config": ours})
			if string(got) != string(want) || (errGot == nil) != (errWant == nil) {
				t.Errorf("doc %d: %s:\nours  %q (%v)\nIstio %q (%v)", i, e, got, errGot, want, errWant)
			}
		}
	}
}
