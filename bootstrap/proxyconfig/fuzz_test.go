package proxyconfig

import (
	"testing"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"
)

// FuzzProxyConfig feeds outside bytes (PROXY_CONFIG, the annotation, the mesh file) through every
// parser of this package: none may panic, and an accepted document must leave a valid config.
func FuzzProxyConfig(f *testing.F) {
	for _, s := range []string{
		`{"statusPort": 15030, "proxyMetadata": {"B": "env"}}`,
		"concurrency: 2\ntracing:\n  zipkin:\n    address: z:9411\n",
		"defaultConfig:\n  discoveryAddress: x:1\n",
		`{"tracing":{"datadog":{"address":"$(HOST_IP):8126"}},"drainDuration":"5s"}`,
		"[1, 2]", "null", "", "a: [", `{"concurrency": -1}`,
		`proxy.istio.io/config="statusPort: 1"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		pc := Default()
		if err := applyLayer(pc, doc, "fuzz", nil); err == nil {
			if err := Validate(pc); err != nil {
				t.Fatalf("accepted layer left an invalid config: %v", err)
			}
		}
		_, _ = parseMeshConfig(doc, "fuzz", nil)
		if js, err := yaml.YAMLToJSON(doc); err == nil {
			_ = unknownFields(js, (&meshv1alpha1.ProxyConfig{}).ProtoReflect().Descriptor())
		}
		if ann, err := ParsePodInfo(doc); err == nil {
			_ = applyAnnotations(Default(), ann, "fuzz", nil)
		}
	})
}
