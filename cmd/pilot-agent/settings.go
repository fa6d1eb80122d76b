package main

import (
	"time"
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

// applyConcurrency applies Istio's rules: ISTIO_CPU_LIMIT when ProxyConfig sets none, and the
// legacy --concurrency flag over both.
func applyConcurrency(s *proxySettings, flag, cpuLimit int, log func(msg string, args ...any)) {
	if !s.ConcurrencySet && cpuLimit > 0 {
		s.Concurrency = cpuLimit
	}
	if flag != 0 {
		log("legacy --concurrency flag overrides ProxyConfig concurrency", "concurrency", flag)
		s.Concurrency = flag
	}
}
