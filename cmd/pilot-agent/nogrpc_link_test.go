package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoGRPCClientLinked keeps grpc-go's client and server out of pilot-agent (issue 16: ~1.6 MB
// of file, its package init at every start, a ClientConn's buffers and goroutines at idle): xDS,
// SDS, the CA client and the gRPC health probes all speak gRPC through internal/h2grpc. Only
// grpc-go's leaf packages for status codes and buffers (codes, status, mem) may be linked, as
// long as they do not pull the root package. Tags as in the Makefile's build.
func TestNoGRPCClientLinked(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the binary's dependencies")
	}
	out, err := exec.Command("go", "list", "-tags", "disable_pgv,grpcnotrace", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{"google.golang.org/grpc/codes", "google.golang.org/grpc/status", "github.com/wingman-mesh/wingman/internal/h2grpc"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list does not show %s: not the dependency list\n%s", want, out)
		}
	}
	for _, p := range deps {
		switch {
		case p == "google.golang.org/grpc", // the root package: ClientConn, Server, their closure
			strings.HasPrefix(p, "google.golang.org/grpc/internal/transport"),
			strings.HasPrefix(p, "google.golang.org/grpc/credentials"),
			strings.HasPrefix(p, "google.golang.org/grpc/balancer"),
			strings.HasPrefix(p, "google.golang.org/grpc/resolver"),
			strings.HasPrefix(p, "google.golang.org/grpc/health"), // generated stubs import the root
			p == "istio.io/api/security/v1alpha1":                 // likewise (the CA's stubs)
			t.Errorf("pilot-agent links %s", p)
		}
	}
}
