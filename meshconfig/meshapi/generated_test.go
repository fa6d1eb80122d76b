package meshapi

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi/internal/meshgen"
)

// TestGeneratedCurrent regenerates from the istio.io/api in go.mod and compares with the committed
// files: run `go generate ./meshconfig/meshapi` when it fails. The descriptor set is compared
// uncompressed (gzip's bytes may change with the Go release).
func TestGeneratedCurrent(t *testing.T) {
	files, err := meshgen.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{meshgen.GoFile, meshgen.JSONFile} {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(src, files[name]) {
			t.Errorf("%s is stale: run go generate ./meshconfig/meshapi", name)
		}
	}
	for name, embedded := range map[string][]byte{meshgen.DescFile: meshDescriptors, meshgen.ProxyDescFile: proxyDescriptors} {
		if !bytes.Equal(gunzip(t, embedded), gunzip(t, files[name])) {
			t.Errorf("%s is stale: run go generate ./meshconfig/meshapi", name)
		}
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
