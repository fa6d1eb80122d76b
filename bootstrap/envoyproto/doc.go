// Package envoyproto checks a rendered bootstrap against Envoy's own protos and merges a bootstrap
// override the way Envoy merges --config-yaml. It reads Envoy's protos from an embedded, compressed
// descriptor set (envoy.pb.gz, written by go generate from go-control-plane's packages) as dynamic
// messages, so the agent links none of go-control-plane's generated bootstrap types; builds
// without disable_pgv also link those types for Envoy's PGV field rules. The descriptors are built
// on first use with internal/lazydesc (no descriptorpb, no protodesc) and held weakly, so they cost
// nothing at start unless used and are freed after.
package envoyproto
