package proxyconfig

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLoad layers a mesh file, PROXY_CONFIG and an annotation over the defaults, as the
// agent does once at start.
func BenchmarkLoad(b *testing.B) {
	dir := b.TempDir()
	mesh := filepath.Join(dir, "mesh")
	ann := filepath.Join(dir, "annotations")
	if err := os.WriteFile(mesh, []byte("accessLogFile: /dev/stdout\nenableTracing: true\ndefaultConfig:\n"+
		"  discoveryAddress: istiod.istio-system.svc:15012\n  tracing:\n    zipkin:\n      address: zipkin.istio-system:9411\n"+
		"  proxyMetadata:\n    DNS_CAPTURE: \"true\"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(ann, []byte(`proxy.istio.io/config="concurrency: 4\nholdApplicationUntilProxyStarts: true\n"`+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	src := Sources{MeshConfigFile: mesh, AnnotationsFile: ann,
		ProxyConfigEnv: `{"statusPort": 15020, "proxyMetadata": {"ISTIO_META_DNS_AUTO_ALLOCATE": "true"}, "drainDuration": "30s"}`}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(src); err != nil {
			b.Fatal(err)
		}
	}
}
