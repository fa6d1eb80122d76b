//go:build !race

package cache

import (
	"context"
	"testing"

	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"

	"github.com/wingman-mesh/wingman/fastpath"
)

// TestGateRewriteAllocs bounds the allocations of rewriting one cached Wasm resource
// (BenchmarkRewriteECDS measured 49 on 2026-12-03) and checks that a non-Wasm ECDS response
// passes without any copy of its bytes. Allocation counts do not drift with machine load.
func TestGateRewriteAllocs(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("gate")
	u := srv.serve("/g.wasm", mod)
	r, _ := newTestRewriter(t, nil)
	env := map[string]string{envPullPolicy: "IfNotPresent", envResourceVersion: "12", "APP": "x"}
	in := sotwFrame(t, tec(t, "g", &httpwasm.Wasm{Config: plugin(u, sum(mod), env, 0)})).Data.Materialize()
	ctx := context.Background()
	if _, err := r.Rewrite(ctx, fastpath.FrameOf(in), false); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(200, func() {
		out, err := r.Rewrite(ctx, fastpath.FrameOf(in), false)
		if err != nil {
			t.Fatal(err)
		}
		out.Free()
	})
	t.Logf("rewrite of one cached Wasm resource: %v allocations (gate 60)", n)
	if n > 60 {
		t.Errorf("rewrite of one cached Wasm resource: %v allocations, gate 60", n)
	}
	plain := sotwFrame(t, tec(t, "p", &wasmv3.PluginConfig{Name: "not a filter"})).Data.Materialize()
	n = testing.AllocsPerRun(200, func() {
		out, err := r.Rewrite(ctx, fastpath.FrameOf(plain), false)
		if err != nil {
			t.Fatal(err)
		}
		out.Free()
	})
	t.Logf("pass-through of a non-Wasm ECDS response: %v allocations (gate 6)", n)
	if n > 6 {
		t.Errorf("pass-through of a non-Wasm ECDS response: %v allocations, gate 6", n)
	}
}
