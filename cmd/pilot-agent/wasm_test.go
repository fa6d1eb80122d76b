package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/internal/metric"
)

// TestWasmPartsFollowsConversionSwitch: ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION=false
// forwards ECDS unchanged (no rewrite, no cache), as Istio; true (the default) wires both.
func TestWasmPartsFollowsConversionSwitch(t *testing.T) {
	a := &agent{env: &options.Env{WasmRemoteLoadConversion: false}, log: slog.New(slog.DiscardHandler)}
	rw, svcs, err := a.wasmParts(metric.NewRegistry())
	if err != nil || rw != nil || len(svcs) != 0 {
		t.Fatalf("conversion off: rewrite %v, services %d, err %v", rw != nil, len(svcs), err)
	}
	a.env = &options.Env{WasmRemoteLoadConversion: true, WasmMaxBinarySize: 1 << 20, WasmHTTPRequestMaxRetries: 5}
	reg := metric.NewRegistry()
	rw, svcs, err = a.wasmParts(reg)
	if err != nil || rw == nil || len(svcs) != 1 || svcs[0].Name != "wasm-cache" || !svcs[0].KeepDuringDrain {
		t.Fatalf("conversion on: rewrite %v, services %+v, err %v", rw != nil, svcs, err)
	}
	if _, ok := reg.Value("wasm_cache_entries"); !ok {
		t.Error("wasm_cache_entries not registered")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := svcs[0].Run(ctx); err != nil { // returns at once and closes the cache
		t.Fatal(err)
	}
}
