// Package descset builds, from go-control-plane's generated packages, the serialized descriptor
// set that envoyproto embeds: config.bootstrap.v3.Bootstrap and every typed config Envoy must
// resolve in Istio's bootstrap and in common overrides, with all the files they depend on. Only
// the generator (go generate in envoyproto) and envoyproto's tests link it; pilot-agent does not,
// which is the point: the generated Go types cost ~2.6 MB of binary and ~1 ms of init.
package descset

import (
	"fmt"

	_ "github.com/cncf/xds/go/udpa/type/v1"
	_ "github.com/cncf/xds/go/xds/type/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/bootstrap/internal_listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/brotli/compressor/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/zstd/compressor/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	gen "github.com/wingman-mesh/wingman/internal/descset"
)

// Packages are the proto packages whose messages the validator must know: the bootstrap and every
// typed config Envoy must resolve in Istio's bootstrap and in common overrides. All files of these
// packages are included, then every file they import and every other file of an imported file's
// package (as linking the generated Go package would register them).
var Packages = []protoreflect.FullName{
	"envoy.config.bootstrap.v3",
	"udpa.type.v1",
	"xds.type.v3",
	"envoy.config.metrics.v3",
	"envoy.config.trace.v3",
	"envoy.extensions.access_loggers.file.v3",
	"envoy.extensions.access_loggers.stream.v3",
	"envoy.extensions.bootstrap.internal_listener.v3",
	"envoy.extensions.compression.brotli.compressor.v3",
	"envoy.extensions.compression.gzip.compressor.v3",
	"envoy.extensions.compression.zstd.compressor.v3",
	"envoy.extensions.filters.http.compressor.v3",
	"envoy.extensions.filters.http.router.v3",
	"envoy.extensions.filters.listener.proxy_protocol.v3",
	"envoy.extensions.filters.listener.tls_inspector.v3",
	"envoy.extensions.filters.network.http_connection_manager.v3",
	"envoy.extensions.load_balancing_policies.least_request.v3",
	"envoy.extensions.resource_monitors.downstream_connections.v3",
	"envoy.extensions.resource_monitors.fixed_heap.v3",
	"envoy.extensions.transport_sockets.tls.v3",
	"envoy.extensions.upstreams.http.v3",
}

// Build returns the gzip-compressed, deterministically serialized FileDescriptorSet of Packages
// and their dependencies, sorted by path.
func Build() ([]byte, error) {
	seen := map[string]protoreflect.FileDescriptor{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if _, ok := seen[fd.Path()]; ok {
			return
		}
		seen[fd.Path()] = fd
		if fd.Package() == "google.protobuf" {
			// Well-known types: only the files imported (which of them a binary links varies).
			imports := fd.Imports()
			for i := range imports.Len() {
				add(imports.Get(i).FileDescriptor)
			}
			return
		}
		protoregistry.GlobalFiles.RangeFilesByPackage(fd.Package(), func(f protoreflect.FileDescriptor) bool {
			add(f)
			return true
		})
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
	}
	for _, pkg := range Packages {
		if protoregistry.GlobalFiles.NumFilesByPackage(pkg) == 0 {
			return nil, fmt.Errorf("descriptor set: no files of package %s are linked", pkg)
		}
		protoregistry.GlobalFiles.RangeFilesByPackage(pkg, func(fd protoreflect.FileDescriptor) bool {
			add(fd)
			return true
		})
	}
	return gen.Files(seen).Encode()
}
