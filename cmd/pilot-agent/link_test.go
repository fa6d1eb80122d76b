package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinkDenyList keeps pilot-agent lean (perf/binary-size.md has the measurements): it must
// not link go-control-plane's generated Envoy types or their closure (certs speaks SDS on the
// wire; bootstrap --validate reads an embedded descriptor set), and not html/template (custom
// bootstrap templates run on text/template, as Istio's do), and not prometheus/client_golang
// (internal/metric writes the text format). klauspost/compress is linked since the Wasm cache
// (issue 14): go-containerregistry needs it for zstd layers and cache/ decompresses modules with
// it (status still compresses with the standard library's gzip).
func TestLinkDenyList(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	out, err := exec.Command("go", "list", "-tags", "disable_pgv,grpcnotrace", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, deny := range []string{"github.com/envoyproxy/go-control-plane/", "github.com/cncf/xds/",
		"github.com/envoyproxy/protoc-gen-validate/", "html/template", "github.com/prometheus/",
		"github.com/wingman-mesh/wingman/lab/",                                                                           // the wall: stand-ins and tools the binary does not ship
		"github.com/wingman-mesh/wingman/internal/descset", "github.com/wingman-mesh/wingman/internal/clock/clocktest"} { // generators and test fakes
		for _, p := range deps {
			if strings.HasPrefix(p, deny) {
				t.Errorf("pilot-agent links %s", p)
			}
		}
	}
	if len(deps) < 100 {
		t.Fatalf("go list printed %d packages: not the dependency list", len(deps))
	}
}
