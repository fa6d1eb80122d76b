package main

// The Wasm remote-load conversion: the module cache and the ECDS rewrite it backs.

import (
	"path/filepath"

	"github.com/wingman-mesh/wingman/cache"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/lifecycle"
	"github.com/wingman-mesh/wingman/internal/istiolog"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/mux"
)

// wasmParts builds the module cache from the WASM_* variables and returns the ECDS rewrite for
// the xDS proxy with the cache's service (the purge loop; it keeps running while Envoy drains,
// as the proxy does). With ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION=false ECDS is
// forwarded unchanged, as Istio, and nothing is built.
func (a *agent) wasmParts(reg *metric.Registry) (mux.Rewriter, []lifecycle.Service, error) {
	env := a.env
	if !env.WasmRemoteLoadConversion {
		return nil, nil, nil
	}
	// Istio's /var/lib/istio/data, resolved against the working directory as the agent's other
	// paths are (Istio's agent runs at /, where it is the same directory); absolute, because the
	// file names go to Envoy.
	dir, err := filepath.Abs("." + cache.DefaultDir)
	if err != nil {
		return nil, nil, err
	}
	c, err := cache.New(cache.Options{
		Dir:                   dir,
		PurgeInterval:         env.WasmPurgeInterval,
		ModuleExpiry:          env.WasmModuleExpiry,
		HTTPRequestTimeout:    env.WasmHTTPRequestTimeout,
		HTTPRequestMaxRetries: env.WasmHTTPRequestMaxRetries,
		InsecureRegistries:    env.WasmInsecureRegistries,
		MaxModuleBytes:        int64(env.WasmMaxBinarySize),
		BlockedCIDRs:          env.BlockedCIDRsInWasmFetch,
		Logger:                a.logger(istiolog.ScopeWasm),
		Registerer:            reg,
	})
	if err != nil {
		return nil, nil, err
	}
	svc := lifecycle.Service{Name: "wasm-cache", Run: c.Run, KeepDuringDrain: true}
	return cache.NewRewriter(c).Rewrite, []lifecycle.Service{svc}, nil
}
