// Package cache is the Wasm module cache behind the ECDS rewrite (Istio: pkg/wasm).
//
// Istiod sends a WasmPlugin to Envoy as an ECDS TypedExtensionConfig whose Wasm code is remote
// (http(s):// or oci://). The agent fetches the module once, keeps it as a content-addressed
// file, and rewrites the resource to load that file, so Envoy never fetches from the network.
// [Rewriter.Rewrite] is the only code in the agent that decodes xDS payloads, and it decodes only
// ECDS resources whose typed config is a Wasm filter: every other byte passes through as is.
//
// A [Cache] owns its fetch goroutines; Close (or the end of Run) cancels and waits for them.
package cache
