package envoyproto

import (
	"encoding/json"
	"os"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// renderedBootstrap is the bootstrap the agent renders for a default sidecar (bootstrap's golden).
func renderedBootstrap(b *testing.B) ([]byte, map[string]any) {
	data, err := os.ReadFile("../testdata/defaults.golden.json")
	if err != nil {
		b.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		b.Fatal(err)
	}
	return data, top
}

// protodescRegistry builds the registry as envoyproto did before internal/lazydesc (descriptorpb
// and protodesc, linked here only by the test): the reference BenchmarkEnvoyDescriptors compares with.
func protodescRegistry(b *testing.B) *registry {
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(gunzip(b, envoyDescriptors), set); err != nil {
		b.Fatal(err)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		b.Fatal(err)
	}
	reg, err := registryOf(files)
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

// BenchmarkEnvoyDescriptors is the cost of validating a rendered bootstrap (what `pilot-agent
// bootstrap --validate` does once, and about what a bootstrap override merge costs): with the
// descriptors built for it the old way (protodesc) and now (lazydesc), and with them held.
func BenchmarkEnvoyDescriptors(b *testing.B) {
	data, top := renderedBootstrap(b)
	check := func(b *testing.B, reg *registry) {
		if f := reg.validate(data, top); len(f) != 0 {
			b.Fatalf("findings: %v", f)
		}
	}
	b.Run("first/protodesc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			check(b, protodescRegistry(b))
		}
	})
	b.Run("first/lazydesc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reg, err := newRegistry(envoyDescriptors)
			if err != nil {
				b.Fatal(err)
			}
			check(b, reg)
		}
	})
	b.Run("held", func(b *testing.B) {
		held, err := envoySet.Files()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if f := Validate(data); len(f) != 0 {
				b.Fatalf("findings: %v", f)
			}
		}
		runtime.KeepAlive(held)
	})
}
