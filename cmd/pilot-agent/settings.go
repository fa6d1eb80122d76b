package main

import (
	"log/slog"
	"time"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// proxySettings is the part of the effective ProxyConfig that the CLI wiring itself needs (the
// supervisor, the preflight checks and the identity). Immutable once resolved.
type proxySettings struct {
	BinaryPath               string
	ConfigPath               string
	DiscoveryAddress         string
	ControlPlaneAuthPolicy   string
	ServiceCluster           string
	ProxyAdminPort           int
	StatusPort               int
	Concurrency              int
	ConcurrencySet           bool // ProxyConfig set concurrency explicitly
	DrainDuration            time.Duration
	TerminationDrainDuration time.Duration
	FileFlushInterval        time.Duration
	FileFlushMinSizeKB       int
}

// defaultSettings are Istio's DefaultProxyConfig values (pkg/config/mesh/mesh.go).
func defaultSettings() proxySettings {
	return proxySettings{
		BinaryPath: "/usr/local/bin/envoy", ConfigPath: "./etc/istio/proxy",
		DiscoveryAddress: "istiod.istio-system.svc:15012", ControlPlaneAuthPolicy: "MUTUAL_TLS",
		ServiceCluster: "istio-proxy", ProxyAdminPort: 15000, StatusPort: 15020,
		DrainDuration: 45 * time.Second, TerminationDrainDuration: 5 * time.Second, FileFlushInterval: time.Second,
	}
}

// applyConcurrency applies Istio's rules to the ProxyConfig itself (pilot-agent config.go,
// 1.28.10 .. master): ISTIO_CPU_LIMIT when ProxyConfig sets no concurrency, and the legacy
// --concurrency flag over both.
func applyConcurrency(pc *meshapi.ProxyConfig, flag, cpuLimit int, log *slog.Logger) {
	if pc.GetConcurrency() == nil && cpuLimit > 0 {
		log.Info("cpu limit detected, setting concurrency", "concurrency", cpuLimit)
		pc.Concurrency = wrapperspb.Int32(int32(cpuLimit))
	}
	if flag != 0 {
		log.Warn("legacy --concurrency flag overrides ProxyConfig concurrency", "concurrency", flag)
		pc.Concurrency = wrapperspb.Int32(int32(flag))
	}
}
