package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
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

// placeholderResolveProxyConfig is a PLACEHOLDER for the bootstrap package's ProxyConfig layering
// (defaults → mesh file → PROXY_CONFIG → proxy.istio.io/config annotation → annotation
// overrides). Until the lead plugs that in (see resolveProxyConfig in hooks.go), it reads only the
// fields of proxySettings from PROXY_CONFIG over Istio's defaults.
func placeholderResolveProxyConfig(env *options.Env) (proxySettings, error) {
	s := defaultSettings()
	if env.ProxyConfig == "" {
		return s, nil
	}
	var pc struct {
		BinaryPath               *string `json:"binaryPath"`
		ConfigPath               *string `json:"configPath"`
		DiscoveryAddress         *string `json:"discoveryAddress"`
		ControlPlaneAuthPolicy   *string `json:"controlPlaneAuthPolicy"`
		ServiceCluster           *string `json:"serviceCluster"`
		ProxyAdminPort           *int    `json:"proxyAdminPort"`
		StatusPort               *int    `json:"statusPort"`
		Concurrency              *int    `json:"concurrency"`
		DrainDuration            *string `json:"drainDuration"`
		TerminationDrainDuration *string `json:"terminationDrainDuration"`
		FileFlushInterval        *string `json:"fileFlushInterval"`
		FileFlushMinSizeKB       *int    `json:"fileFlushMinSizeKb"`
	}
	unmarshal := func(b []byte, v any) error { return yaml.Unmarshal(b, v) }
	if strings.HasPrefix(strings.TrimSpace(env.ProxyConfig), "{") {
		unmarshal = json.Unmarshal // the injector's form: skip the YAML conversion
	}
	if err := unmarshal([]byte(env.ProxyConfig), &pc); err != nil {
		return s, fmt.Errorf("environment variable PROXY_CONFIG: %w", err)
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.BinaryPath, pc.BinaryPath)
	set(&s.ConfigPath, pc.ConfigPath)
	set(&s.DiscoveryAddress, pc.DiscoveryAddress)
	set(&s.ControlPlaneAuthPolicy, pc.ControlPlaneAuthPolicy)
	set(&s.ServiceCluster, pc.ServiceCluster)
	for _, f := range []struct {
		dst  *int
		v    *int
		name string
	}{{&s.ProxyAdminPort, pc.ProxyAdminPort, "proxyAdminPort"}, {&s.StatusPort, pc.StatusPort, "statusPort"},
		{&s.Concurrency, pc.Concurrency, "concurrency"}, {&s.FileFlushMinSizeKB, pc.FileFlushMinSizeKB, "fileFlushMinSizeKb"}} {
		if f.v != nil {
			if *f.v < 0 || (f.name != "concurrency" && f.name != "fileFlushMinSizeKb" && *f.v > 65535) {
				return s, fmt.Errorf("environment variable PROXY_CONFIG: %s %d out of range", f.name, *f.v)
			}
			*f.dst = *f.v
		}
	}
	s.ConcurrencySet = pc.Concurrency != nil
	for _, f := range []struct {
		dst  *time.Duration
		v    *string
		name string
	}{{&s.DrainDuration, pc.DrainDuration, "drainDuration"},
		{&s.TerminationDrainDuration, pc.TerminationDrainDuration, "terminationDrainDuration"},
		{&s.FileFlushInterval, pc.FileFlushInterval, "fileFlushInterval"}} {
		if f.v != nil {
			d, err := time.ParseDuration(*f.v)
			if err != nil || d < 0 {
				return s, fmt.Errorf("environment variable PROXY_CONFIG: %s %q is not a duration", f.name, *f.v)
			}
			*f.dst = d
		}
	}
	return s, nil
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
