// Package meshapi holds Istio's ProxyConfig (istio.mesh.v1alpha1.ProxyConfig and every type it
// reaches) as plain Go types, and parses ProxyConfig and MeshConfig documents with dynamic
// messages built from embedded descriptor sets (ProxyConfig's closure, and MeshConfig's), so that pilot-agent links none of istio.io/api's
// generated packages (their raw descriptors, registration at init, and the networking API they
// drag in).
//
// The types have the exported fields, struct tags, getters, oneof wrappers and enum names that
// protoc-gen-go gives istio.io/api's, because custom bootstrap templates receive the ProxyConfig
// as .config and may read any of them (TestShapesMatchIstio checks every field and method against
// istio.io/api). They are not proto.Messages: ToDynamic and FromDynamic convert to and from
// dynamicpb messages of the embedded descriptors, which protojson parses and prints. Writing JSON
// needs no descriptors: protojson.gen.go holds a generated writer of protojson's bytes
// (MarshalProtoJSON, AppendProtoJSON), so the bootstrap's PROXY_CONFIG costs no descriptor build.
//
// types.gen.go, protojson.gen.go, mesh.pb.gz and proxy.pb.gz are generated from the istio.io/api in go.mod by
// `go generate ./meshconfig/meshapi`; TestGeneratedCurrent fails when they are stale.
package meshapi

//go:generate go run ./internal/genmeshapi .
