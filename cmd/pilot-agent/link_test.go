package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkDenyList keeps pilot-agent lean (perf/binary-size.md has the measurements): it must
// not link go-control-plane's generated Envoy types or their closure (certs speaks SDS on the
// wire; bootstrap --validate reads an embedded descriptor set), and not text/template's executor,
// whose reflect.Value.MethodByName makes the linker keep every exported method in the binary
// (bootstrap/internal/tmpl executes custom templates instead), and not prometheus/client_golang
// (internal/metric writes the text format). klauspost/compress is linked since the Wasm cache
// (issue 14): go-containerregistry needs it for zstd layers and cache/ decompresses modules
// with it (status still compresses with the standard library's gzip).
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
		"github.com/envoyproxy/protoc-gen-validate/", "html/template", "github.com/prometheus/"} {
		for _, p := range deps {
			if strings.HasPrefix(p, deny) {
				t.Errorf("pilot-agent links %s", p)
			}
		}
	}
	if len(deps) < 100 {
		t.Fatalf("go list printed %d packages: not the dependency list", len(deps))
	}

	// The executor is a set of functions of a package that is linked anyway (tmpl uses its
	// escapers): look for them in the symbol table of an unstripped build.
	bin := filepath.Join(t.TempDir(), "pa")
	if out, err := exec.Command("go", "build", "-tags", "disable_pgv,grpcnotrace", "-trimpath", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	syms, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	if !strings.Contains(string(syms), "bootstrap.RenderTemplate") {
		t.Fatal("the symbol table does not hold bootstrap.RenderTemplate: the check below would pass vacuously")
	}
	if strings.Contains(string(syms), "text/template.(*state).") {
		t.Error("pilot-agent links text/template's executor: the linker keeps every exported method")
	}
}
