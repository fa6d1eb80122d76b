package proxyconfig

import (
	"strings"
	"testing"
)

// TestErrorsNameTheFieldPath: a refused value is named by its field path, as the user wrote
// the keys, with the value and the type wanted; protojson's own error named no path (only
// "field value" for a wrapper) and gave the column of the JSON the YAML was converted to.
// Accept/reject is unchanged (FuzzProxyConfig compares it with istio.io/api's ProxyConfig).
func TestErrorsNameTheFieldPath(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"concurrency: notanumber", `PROXY_CONFIG: concurrency: invalid value "notanumber" for int32`},
		{"tracing:\n  zipkin:\n    address: [1]\n", `PROXY_CONFIG: tracing.zipkin.address: invalid value [1] for string`},
		{`{"tracing": {"sampling": "lots"}}`, `PROXY_CONFIG: tracing.sampling: invalid value "lots" for double`},
		{"drainDuration: 5 minutes", `PROXY_CONFIG: drainDuration: invalid value "5 minutes" for google.protobuf.Duration`},
		{"interceptionMode: 7.5", `PROXY_CONFIG: interceptionMode: invalid value 7.5 for enum istio.mesh.v1alpha1.ProxyConfig.InboundInterceptionMode`},
		{"proxyMetadata:\n  A: x\n  B: {c: d}\n", `PROXY_CONFIG: proxyMetadata[B]: invalid value {"c":"d"} for string`},
		{"extraStatTags: [a, [b]]", `PROXY_CONFIG: extraStatTags[1]: invalid value ["b"] for string`},
		{"readinessProbe:\n  httpGet:\n    httpHeaders:\n    - name: a\n      value: {}\n", `PROXY_CONFIG: readinessProbe.httpGet.httpHeaders[0].value: invalid value {} for string`},
		{"status_port: x", `PROXY_CONFIG: status_port: invalid value "x" for int32`},
	} {
		_, err := ParseProxyConfig([]byte(tc.doc), SourceProxyConfigEnv, nil)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got  %v\n want %s", tc.doc, err, tc.want)
		}
		// The mesh file names the path from its own root.
		mesh := "defaultConfig:\n  " + strings.ReplaceAll(tc.doc, "\n", "\n  ")
		if strings.HasPrefix(tc.doc, "{") {
			mesh = `{"defaultConfig": ` + tc.doc + "}"
		}
		_, err = parseMeshConfig([]byte(mesh), "m", nil)
		want := strings.Replace(tc.want, "PROXY_CONFIG: ", "mesh config m: defaultConfig.", 1)
		if err == nil || err.Error() != want {
			t.Errorf("mesh %q:\n got  %v\n want %s", mesh, err, want)
		}
	}
}
