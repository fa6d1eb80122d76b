package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinkNoIstioMeshAPI keeps istio.io/api's generated mesh and networking packages (and what they
// drag in: type/, analysis/, meta/, the genproto annotations, github.com/golang/protobuf's jsonpb)
// out of pilot-agent: ProxyConfig is internal/meshapi's plain types, parsed through an embedded
// descriptor set (issue 16: ~0.35 MB of text and ~250 KB of init allocations). The one package
// still allowed to import github.com/golang/protobuf is istio.io/api/security/v1alpha1 (the CA
// client's, being replaced separately); once it is gone the rule holds with no exception.
func TestLinkNoIstioMeshAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the binary's dependencies")
	}
	out, err := exec.Command("go", "list", "-tags", "disable_pgv,grpcnotrace", "-deps",
		"-f", "{{.ImportPath}} {{join .Imports \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 100 {
		t.Fatalf("go list printed %d packages: not the dependency list", len(lines))
	}
	deny := []string{"istio.io/api/mesh/", "istio.io/api/networking/", "istio.io/api/type/",
		"istio.io/api/analysis/", "istio.io/api/meta/", "google.golang.org/genproto/googleapis/api/",
		"github.com/wingman-mesh/wingman/internal/meshapi/internal/"}
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, d := range deny {
			if strings.HasPrefix(pkg, d) {
				t.Errorf("pilot-agent links %s", pkg)
			}
		}
		if strings.HasPrefix(pkg, "github.com/golang/protobuf/") || pkg == "istio.io/api/security/v1alpha1" {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, "github.com/golang/protobuf/") {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
}
