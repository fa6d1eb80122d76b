package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// linkDenied are the packages pilot-agent must not link (perf/binary-size.md has the
// measurements), each a path prefix unless exact, with why.
var linkDenied = []struct {
	pkg   string
	exact bool
	why   string
}{
	// Issue 7. certs speaks SDS on the wire; bootstrap --validate reads an embedded descriptor set.
	{pkg: "github.com/envoyproxy/go-control-plane/", why: "go-control-plane's generated Envoy types"},
	{pkg: "github.com/cncf/xds/", why: "go-control-plane's closure"},
	{pkg: "github.com/envoyproxy/protoc-gen-validate/", why: "go-control-plane's closure"},
	{pkg: "html/template", why: "custom bootstrap templates run on text/template, as Istio's do"},
	{pkg: "github.com/prometheus/", why: "internal/metric writes the text format"},
	{pkg: "github.com/wingman-mesh/wingman/lab/", why: "the wall: stand-ins and tools the binary does not ship"},
	{pkg: "github.com/wingman-mesh/wingman/internal/descset", why: "a generator"},
	{pkg: "github.com/wingman-mesh/wingman/internal/clock/clocktest", why: "a test fake"},
	// Issue 23: h2spec runs from go.mod's tool directive in transport/h2grpc's tests.
	{pkg: "github.com/summerwind/h2spec", why: "a conformance test tool (go tool h2spec)"},
	// Issue 16: ProxyConfig is meshconfig/meshapi's plain types (~1.25 MB of file, ~250 KB of init
	// allocations). Its generator imports istio.io/api and must stay out too.
	{pkg: "istio.io/api/", why: "meshconfig/meshapi holds ProxyConfig; the CA messages are written by protowire (certs/caproto.go)"},
	{pkg: "google.golang.org/genproto/googleapis/api/", why: "istio.io/api's closure"},
	{pkg: "github.com/golang/protobuf/", why: "istio.io/api's closure (jsonpb)"},
	{pkg: "github.com/wingman-mesh/wingman/meshconfig/meshapi/internal/", why: "meshapi's generator"},
	// Issue 16: xDS, SDS, the CA client and the gRPC health probes speak gRPC through
	// transport/h2grpc (~1.4 MB of file, grpc-go's init, a ClientConn's goroutines at idle). Only
	// grpc-go's leaf packages for codes, status and buffers may be linked.
	{pkg: "google.golang.org/grpc", exact: true, why: "grpc-go's ClientConn and Server and their closure"},
	{pkg: "google.golang.org/grpc/internal/transport", why: "grpc-go's transport"},
	{pkg: "google.golang.org/grpc/credentials", why: "grpc-go's transport"},
	{pkg: "google.golang.org/grpc/balancer", why: "grpc-go's client"},
	{pkg: "google.golang.org/grpc/resolver", why: "grpc-go's client"},
	{pkg: "google.golang.org/grpc/health", why: "generated stubs import grpc-go's root package"},
	// Issue 16: the embedded descriptor sets are built with internal/lazydesc (protodesc's init
	// alone was ~0.7 ms and ~176 KB of heap kept at every start).
	{pkg: "google.golang.org/protobuf/reflect/protodesc", exact: true, why: "internal/lazydesc builds descriptors"},
	{pkg: "google.golang.org/protobuf/types/descriptorpb", exact: true, why: "internal/lazydesc builds descriptors"},
	{pkg: "google.golang.org/protobuf/types/gofeaturespb", exact: true, why: "descriptorpb's"},
	{pkg: "google.golang.org/protobuf/types/pluginpb", exact: true, why: "protoc plugins only"},
}

// TestLinkDenyList keeps pilot-agent lean: none of linkDenied is in its dependencies (build tags
// as in the Makefile). klauspost/compress is linked since the Wasm cache (issue 14):
// go-containerregistry needs it for zstd layers and cache/ decompresses modules with it.
func TestLinkDenyList(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the binary's dependencies")
	}
	out, err := exec.Command("go", "list", "-tags", "disable_pgv,grpcnotrace", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{"google.golang.org/grpc/codes", "github.com/wingman-mesh/wingman/transport/h2grpc", "github.com/wingman-mesh/wingman/meshconfig/meshapi"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list does not show %s: not the dependency list\n%s", want, out)
		}
	}
	for _, d := range linkDenied {
		for _, p := range deps {
			if p == d.pkg || !d.exact && strings.HasPrefix(p, d.pkg) {
				t.Errorf("pilot-agent links %s (%s)", p, d.why)
			}
		}
	}
}
