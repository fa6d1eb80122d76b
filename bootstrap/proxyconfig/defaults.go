package proxyconfig

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// Defaults Istio applies when nothing else is said (pkg/config/mesh DefaultProxyConfig).
const (
	DefaultConfigPath       = "./etc/istio/proxy"
	DefaultBinaryPath       = "/usr/local/bin/envoy"
	DefaultServiceCluster   = "istio-proxy"
	DefaultDiscoveryAddress = "istiod.istio-system.svc:15012"
	DefaultProxyAdminPort   = 15000
	DefaultStatusPort       = 15020
	DefaultStatNameLength   = 189
)

// Default returns a fresh ProxyConfig holding Istio's built-in defaults. The caller owns it.
func Default() *meshapi.ProxyConfig {
	return &meshapi.ProxyConfig{
		ConfigPath:               DefaultConfigPath,
		BinaryPath:               DefaultBinaryPath,
		ClusterName:              &meshapi.ProxyConfig_ServiceCluster{ServiceCluster: DefaultServiceCluster},
		DrainDuration:            durationpb.New(45 * time.Second),
		TerminationDrainDuration: durationpb.New(5 * time.Second),
		ProxyAdminPort:           DefaultProxyAdminPort,
		StatusPort:               DefaultStatusPort,
		ControlPlaneAuthPolicy:   meshapi.AuthenticationPolicy_MUTUAL_TLS,
		DiscoveryAddress:         DefaultDiscoveryAddress,
		StatNameLength:           DefaultStatNameLength,
	}
}
