// Package bootstrap renders the Envoy bootstrap and the proxyless gRPC bootstrap that Istio's agent
// writes, as typed values marshalled to JSON, with the node id and node metadata Istiod parses.
//
// The render path links none of Envoy's protos: envoy.go holds small Go types named and shaped like
// Envoy's JSON (see ARCHITECTURE.md for the measured reason). They are written without reflection
// (jsonw.go, driven by the appendJSON methods internal/jsongen generates from the struct tags
// into json.gen.go), byte for byte as json.MarshalIndent writes them, so start-up builds no
// encoding/json type caches; jsonw_test.go holds the proof. Subpackage envoyproto checks the
// output against Envoy's own protos and merges ISTIO_BOOTSTRAP_OVERRIDE as Envoy does; subpackage
// proxyconfig builds the ProxyConfig.
//
// Nothing here reads the environment: the caller passes the process environment in Config.Env.
package bootstrap

//go:generate go run ./internal/genjson
