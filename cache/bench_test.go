package cache

import (
	"context"
	"testing"

	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"

	"github.com/wingman-mesh/wingman/fastpath"
)

// BenchmarkRewriteECDS is the cost of rewriting one Wasm resource whose module is cached (the
// steady state: every push of a WasmPlugin after the first), with Istiod's environment
// variables to strip. Target (issue 14): at most 50 µs per resource.
func BenchmarkRewriteECDS(b *testing.B) {
	srv := newModuleServer(b)
	mod := wasmModule("bench")
	u := srv.serve("/b.wasm", mod)
	r, _ := newTestRewriter(b, nil)
	env := map[string]string{envPullPolicy: "IfNotPresent", envResourceVersion: "12", "APP": "x"}
	frame := sotwFrame(b, tec(b, "extensions.istio.io/wasmplugin/ns.bench", &httpwasm.Wasm{Config: plugin(u, sum(mod), env, wasmv3.FailurePolicy_FAIL_CLOSED)}))
	in := frame.Data.Materialize()
	ctx := context.Background()
	if _, err := r.Rewrite(ctx, fastpath.FrameOf(in), false); err != nil { // warm the cache
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		out, err := r.Rewrite(ctx, fastpath.FrameOf(in), false)
		if err != nil {
			b.Fatal(err)
		}
		out.Free()
	}
	if srv.count("/b.wasm") != 1 {
		b.Fatalf("%d fetches", srv.count("/b.wasm"))
	}
}
