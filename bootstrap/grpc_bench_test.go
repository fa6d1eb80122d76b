package bootstrap

import (
	"path/filepath"
	"testing"
)

// BenchmarkWriteGRPCBootstrap renders the gRPC bootstrap (with certificate providers) and writes
// it to a file, as the agent does at start with GRPC_XDS_BOOTSTRAP set.
func BenchmarkWriteGRPCBootstrap(b *testing.B) {
	cfg := baseConfig(b)
	dir := b.TempDir()
	path := filepath.Join(dir, "grpc-bootstrap.json")
	certs := filepath.Join(dir, "certs")
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteGRPCBootstrap(path, cfg, certs); err != nil {
			b.Fatal(err)
		}
	}
}
