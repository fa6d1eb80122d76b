// Package wasmdesc builds, from go-control-plane's generated packages, the descriptor set that
// cache embeds: Envoy's HTTP and network Wasm filters and every file they import. Only the
// generator (go generate in cache) and cache's tests link it; pilot-agent does not
// (cmd/pilot-agent/link_test.go).
package wasmdesc

import (
	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	netwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	_ "google.golang.org/protobuf/types/known/wrapperspb" // what Istio's plugin config Any holds

	"github.com/wingman-mesh/wingman/internal/descset"
)

// Build returns the gzip-compressed, deterministically serialized FileDescriptorSet of the two
// Wasm filter files, wrappers.proto and their imports, sorted by path.
func Build() ([]byte, error) {
	files := descset.Files{}
	files.AddWithImports((&httpwasm.Wasm{}).ProtoReflect().Descriptor().ParentFile())
	files.AddWithImports((&netwasm.Wasm{}).ProtoReflect().Descriptor().ParentFile())
	return files.Encode()
}
