package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinkNoProtodesc keeps protodesc and descriptorpb out of pilot-agent (issue 16): protodesc's
// init alone cost ~0.3-0.7 ms and ~176 KB of heap kept for good per start, descriptorpb's ~47 KB
// (GODEBUG=inittrace=1). The agent's embedded descriptor sets (internal/meshapi, cache,
// bootstrap/envoyproto) are built with internal/lazydesc, which needs neither.
//
// The one importer still allowed is github.com/golang/protobuf (pulled by
// istio.io/api/security/v1alpha1, the CA client's, being replaced separately; TestLinkNoIstioMeshAPI
// pins that): once it is gone from the binary, protodesc and descriptorpb must be too.
func TestLinkNoProtodesc(t *testing.T) {
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
	denied := map[string]bool{
		"google.golang.org/protobuf/reflect/protodesc":  true,
		"google.golang.org/protobuf/types/descriptorpb": true,
		"google.golang.org/protobuf/types/gofeaturespb": true, // descriptorpb's Go features, protodesc's
		"google.golang.org/protobuf/types/pluginpb":     true,
	}
	golangProtobuf := false
	var linked []string
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, " ")
		if denied[pkg] {
			linked = append(linked, pkg)
		}
		if strings.HasPrefix(pkg, "github.com/golang/protobuf/") {
			golangProtobuf = true
			continue
		}
		if strings.HasPrefix(pkg, "google.golang.org/protobuf/") {
			continue // protodesc itself and its own dependencies
		}
		for _, imp := range strings.Fields(imports) {
			if denied[imp] {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
	if !golangProtobuf && len(linked) > 0 {
		t.Errorf("pilot-agent links %v, and github.com/golang/protobuf no longer pulls them", linked)
	}
}
