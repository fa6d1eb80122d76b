//go:build tools

// Package deps pins the modules that parts of the agent under construction will import,
// so that parallel work on several parts does not race on go.mod. It is never built.
package deps

import (
	_ "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/klauspost/compress/gzhttp"
	_ "github.com/miekg/dns"
	_ "github.com/planetscale/vtprotobuf/protohelpers"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/pflag"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/xds"
	_ "istio.io/api/security/v1alpha1"
	_ "sigs.k8s.io/yaml"
)
