package main

// The wiring: each part of the agent built from the one parsed environment and the effective
// ProxyConfig, as lifecycle services in Istio's start order.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/wingman-mesh/wingman/bootstrap"
	"github.com/wingman-mesh/wingman/bootstrap/proxyconfig"
	"github.com/wingman-mesh/wingman/certs"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/lifecycle"
	"github.com/wingman-mesh/wingman/dns"
	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/mux"
	"github.com/wingman-mesh/wingman/status"
)

const (
	annotationsFile = "./etc/istio/pod/annotations"
	sdsSocketDir    = "./var/run/secrets/workload-spiffe-uds"
	resolvConfPath  = "/etc/resolv.conf"
)

// processStart is when the agent began, for startup_duration_seconds.
var processStart = time.Now()

// resolveProxyConfig layers the ProxyConfig as Istio does (defaults, mesh file, PROXY_CONFIG,
// the proxy.istio.io/config annotation) and keeps it on the agent for the bootstrap.
func resolveProxyConfig(a *agent) (proxySettings, error) {
	pc, err := proxyconfig.Load(proxyconfig.Sources{MeshConfigFile: a.flags.meshConfig,
		ProxyConfigEnv: a.env.ProxyConfig, AnnotationsFile: annotationsFile, Logger: a.log})
	if err != nil {
		return proxySettings{}, err
	}
	a.proxyConfig = pc
	return settingsOf(pc), nil
}

// settingsOf extracts what the CLI wiring itself needs from the effective ProxyConfig.
func settingsOf(pc *meshv1alpha1.ProxyConfig) proxySettings {
	s := defaultSettings()
	s.BinaryPath, s.ConfigPath, s.DiscoveryAddress = pc.GetBinaryPath(), pc.GetConfigPath(), pc.GetDiscoveryAddress()
	s.ControlPlaneAuthPolicy = pc.GetControlPlaneAuthPolicy().String()
	s.ServiceCluster = pc.GetServiceCluster()
	s.ProxyAdminPort, s.StatusPort = int(pc.GetProxyAdminPort()), int(pc.GetStatusPort())
	if c := pc.GetConcurrency(); c != nil {
		s.Concurrency, s.ConcurrencySet = int(c.GetValue()), true
	}
	if d := pc.GetDrainDuration(); d != nil {
		s.DrainDuration = d.AsDuration()
	}
	if d := pc.GetTerminationDrainDuration(); d != nil {
		s.TerminationDrainDuration = d.AsDuration()
	}
	if d := pc.GetFileFlushInterval(); d != nil {
		s.FileFlushInterval = d.AsDuration()
	}
	s.FileFlushMinSizeKB = int(pc.GetFileFlushMinSizeKb())
	return s
}

// partServices builds the agent's parts in Istio's start order: DNS, certificates and SDS, the
// xDS proxy, the gRPC bootstrap, the status server. Envoy is appended after them by runProxy.
func partServices(a *agent) ([]lifecycle.Service, error) {
	env, s := a.env, a.settings
	reg, prefixed := status.NewAgentRegistry()
	var services []lifecycle.Service

	var dnsServer *dns.Server
	if env.DNSCapture || env.EnableDNSServer {
		var err error
		dnsServer, err = dns.New(dns.Config{
			Addr: env.DNSProxyAddr, ResolvConf: resolvConfPath, Namespace: env.PodNamespace,
			Domain: a.identity.DNSDomain, ForwardTimeout: env.DNSForwardTimeout, ForwardParallel: env.DNSForwardParallel,
			RespondBeforeSync: os.Getuid() == 0 && strings.HasSuffix(env.DNSProxyAddr, ":53"),
			AutoAllocate:      env.Meta["DNS_AUTO_ALLOCATE"] == "true",
			Logger:            a.log.With("part", "dns"), Registerer: reg,
		})
		if err != nil {
			return nil, err
		}
		services = append(services, lifecycle.Service{Name: "dns", Run: dnsServer.Run, KeepDuringDrain: true})
	}

	manager, sds, err := a.certParts(reg)
	if err != nil {
		return nil, err
	}
	if manager != nil {
		services = append(services, lifecycle.Service{Name: "certs", Run: manager.Run, KeepDuringDrain: true})
	}
	if sds != nil {
		services = append(services, lifecycle.Service{Name: "sds", Run: sds.Run, KeepDuringDrain: true})
	}

	rewriteECDS, wasmServices, err := a.wasmParts(prefixed) // wasm.go
	if err != nil {
		return nil, err
	}
	services = append(services, wasmServices...)
	proxy, err := a.xdsProxy(reg, manager, dnsServer, rewriteECDS)
	if err != nil {
		return nil, err
	}
	xdsSocket := filepath.Join(s.ConfigPath, "XDS")
	var xdsListener net.Listener
	services = append(services, lifecycle.Service{
		Name: "xds-proxy", KeepDuringDrain: true,
		Start: func(context.Context) (err error) {
			xdsListener, err = mux.Listen(xdsSocket) // bound before Envoy starts
			return err
		},
		Run: func(ctx context.Context) error { return proxy.Serve(ctx, xdsListener) },
	})

	if env.GRPCXDSBootstrap != "" {
		// Written off Envoy's start-up path (Envoy does not read it); readiness checks it.
		services = append(services, lifecycle.Service{Name: "grpc-bootstrap", KeepDuringDrain: true,
			Run: func(ctx context.Context) error {
				if err := bootstrap.WriteGRPCBootstrap(env.GRPCXDSBootstrap, a.bootstrapConfig(), env.OutputCerts); err != nil {
					return err
				}
				<-ctx.Done()
				return nil
			}})
	}

	if s.StatusPort != 0 {
		stCfg := status.Config{
			Port: s.StatusPort, AdminPort: s.ProxyAdminPort, EnvoyPrometheusPort: env.EnvoyPrometheusPort,
			NoEnvoy: env.DisableEnvoy, SkipEnvoyStats: !env.MergeEnvoyStats, NodeType: a.identity.Type,
			AppProbers: env.KubeAppProbers, DisableHTTP2Probing: !env.EnableHTTP2Probing,
			ProbeKeepAlive: env.EnableProbeKeepalive, PrometheusAnnotations: env.PrometheusAnnotations,
			MetricsLocalhostOnly: env.MetricsLocalhostAccessOnly, Profiling: a.flags.profiling,
			GRPCBootstrapPath: env.GRPCXDSBootstrap, CheckGRPCBootstrap: bootstrap.ProbeGRPCBootstrap,
			Lifecycle: agentLifecycle{a}, Gatherer: reg, Registerer: prefixed, ProcessStart: processStart,
			Logger: a.log.With("part", "status"),
		}
		if len(a.identity.IPs) > 0 {
			stCfg.ProbeTargetHost = a.identity.IPs[0]
		}
		if dnsServer != nil {
			stCfg.DNSEnabled, stCfg.DNS, stCfg.NDSZ = true, dnsServer, dnsServer.NDSZ
		}
		st, err := status.New(stCfg)
		if err != nil {
			return nil, err
		}
		services = append(services, lifecycle.Service{Name: "status", Run: st.Run})
	}
	return services, nil
}

// sdsSocketPath is where Envoy's SDS is served.
func (a *agent) sdsSocketPath() string {
	socketFile := a.env.WorkloadIdentitySocketFile
	if socketFile == "" {
		socketFile = "socket"
	}
	return filepath.Join(sdsSocketDir, socketFile)
}

// probeSDSSocket decides, as Istio does, whether another SDS server (SPIRE) already answers on
// the SDS socket; then the agent serves only file certificates. Both the certificate parts and
// the bootstrap (file-credential metadata) depend on it.
func (a *agent) probeSDSSocket() {
	path := a.sdsSocketPath()
	serveOnlyFiles, err := certs.ProbeSDSSocket(path, time.Second)
	if err != nil {
		a.log.Warn("probing the SDS socket failed", "path", path, "error", err)
	}
	a.serveOnlyFiles = serveOnlyFiles
}

// certParts builds the secret manager and, unless Envoy is disabled, the SDS server.
func (a *agent) certParts(reg *metric.Registry) (*certs.Manager, *certs.Server, error) {
	env, s := a.env, a.settings
	sdsPath := a.sdsSocketPath()
	serveOnlyFiles := a.serveOnlyFiles // decided by probeSDSSocket before anything started
	caAddr := env.CAAddr
	if caAddr == "" {
		caAddr = s.DiscoveryAddress
	}
	cfg := certs.Config{
		TrustDomain: env.TrustDomain, Namespace: env.PodNamespace, ServiceAccount: env.ServiceAccount,
		RSAKeySize: env.WorkloadRSAKeySize, ECCCurve: env.ECCCurve, PKCS8: env.PKCS8Key,
		SecretTTL: env.SecretTTL, GracePeriodRatio: env.SecretGracePeriodRatio, GracePeriodRatioJitter: env.SecretGracePeriodRatioJitter,
		CAAddr: caAddr, IstiodSAN: env.IstiodSAN, ProvCertDir: env.ProvCert, TokenPath: tokenPath,
		CARootPath: certs.CARootPathFor(certs.CARootSearch{CARootCA: env.CARootCA, PilotCertProvider: env.PilotCertProvider, ProvCert: env.ProvCert}),
		ClusterID:  env.ClusterID, CAHeaders: env.CAHeaders, CertSigner: env.CertSigner,
		OutputCertsDir: env.OutputCerts,
		FileCertDirs:   []string{"./etc/certs", "./var/run/secrets/workload-spiffe-credentials"},
		FileDebounce:   env.FileDebounceDuration, SDSSocketPath: sdsPath, ServeOnlyFiles: serveOnlyFiles,
		Logger: a.log, Registerer: reg,
	}
	if env.ECCSignatureAlgorithm == "ECDSA" {
		cfg.KeyType = certs.KeyECDSA
	}
	if env.KubernetesServiceHost != "" {
		cfg.OutputCertsMode = 0o644 // as Istio, on Kubernetes
	}
	if env.FileMountedCerts {
		cfg.CAAddr = "" // certificates only come from files
	}
	m, err := certs.NewManager(cfg)
	if err != nil {
		return nil, nil, err
	}
	if env.DisableEnvoy {
		return m, nil, nil // as Istio: no SDS server without Envoy; certificates go to OUTPUT_CERTS
	}
	return m, certs.NewServer(m), nil
}

// xdsProxy builds the xDS proxy with its one upstream connection to Istiod.
func (a *agent) xdsProxy(reg *metric.Registry, m *certs.Manager, d *dns.Server, rewriteECDS mux.Rewriter) (*mux.Proxy, error) {
	env, s := a.env, a.settings
	addr := s.DiscoveryAddress
	up := mux.UpstreamConfig{
		Address:   addr,
		Plaintext: strings.HasSuffix(addr, ":15010") || s.ControlPlaneAuthPolicy == "NONE",
		TokenFile: tokenPath, KeepaliveTime: env.GRPCKeepaliveInterval, KeepaliveTimeout: env.GRPCKeepaliveTimeout,
		ServerName: certs.CAServerName(addr, env.IstiodSAN),
		Metadata:   map[string]string{},
	}
	if !up.Plaintext {
		root, err := xdsRootPath(env)
		if err != nil {
			return nil, err
		}
		up.RootCAFile = root
		if m != nil && !env.FileMountedCerts {
			up.ClientCertificate = m.GetClientCertificate
		}
	}
	if env.ClusterID != "" {
		up.Metadata["ClusterID"] = env.ClusterID
	}
	for k, v := range env.XDSHeaders {
		up.Metadata[k] = v
	}
	agentTypes := map[string]mux.Handler{}
	if d != nil {
		agentTypes[fastpath.NameTableType] = func(res [][]byte) error { return d.UpdateNameTable(res[0]) }
	}
	return mux.New(mux.Config{
		SocketPath: filepath.Join(s.ConfigPath, "XDS"), Upstream: up, AgentTypes: agentTypes, RewriteECDS: rewriteECDS,
		MaxMessageBytes: env.XDSMaxMessageBytes, CloseOnUpstreamLoss: env.XDSCloseOnUpstreamLoss,
		Logger: a.log.With("part", "xds-proxy"), Registerer: reg,
	})
}

// bootstrapConfig is the bootstrap package's view of the agent.
func (a *agent) bootstrapConfig() bootstrap.Config {
	env := a.env
	c := bootstrap.NewConfig()
	if a.identity.Type == "router" {
		c.NodeType = bootstrap.Router
	}
	c.IPs, c.PodName, c.PodNamespace = a.identity.IPs, env.PodName, env.PodNamespace
	c.Domain, c.ServiceAccount, c.ProxyConfig = a.identity.DNSDomain, env.ServiceAccount, a.proxyConfig
	c.Env = env.Environ
	c.XDSSocket = filepath.Join(a.settings.ConfigPath, "XDS")
	if env.WorkloadIdentitySocketFile != "" {
		c.WorkloadIdentitySocketFile = env.WorkloadIdentitySocketFile
	}
	c.EnvoyStatusPort, c.EnvoyPrometheusPort = env.EnvoyStatusPort, env.EnvoyPrometheusPort
	c.EnvoySecureMetricsPort, c.EnvoySecureMergedMetricsPort = env.EnvoySecureMetricsPort, env.EnvoySecureMergedMetricsPort
	c.STSPort = a.flags.stsPort
	c.Delta, c.DualStack, c.MetadataDiscovery = env.DeltaXDS, env.DualStack, env.PeerMetadataDiscovery
	c.ExitOnZeroActiveConnections, c.EnvoySkipDeprecatedLogs = env.ExitOnZeroActiveConnections, env.EnvoySkipDeprecatedLogs
	c.StatusPortProxyProtocol, c.LogAsJSON = env.StatusPortProxyProtocol, a.root.asJSON
	c.FIPS = env.CompliancePolicy == "fips-140-2" || env.CompliancePolicy == "fips-140-3"
	c.OutlierLogPath, c.IstioVersion = a.flags.outlierLogPath, buildVersion()
	c.FileCredential = a.serveOnlyFiles
	c.Logger = a.log.With("part", "bootstrap")
	return c
}

// prerender renders Envoy's bootstrap on its own goroutine, overlapping the start of the other
// parts; the returned function waits for the result (the caller must call it once).
func prerender(a *agent) func() ([]byte, error) {
	var data []byte
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err = renderBootstrap(a)
	}()
	return func() ([]byte, error) {
		<-done
		return data, err
	}
}

// renderBootstrap renders Envoy's bootstrap: typed rendering by default, Istio's custom template
// when ISTIO_BOOTSTRAP or --templateFile names one. (A customConfigFile is handed to Envoy as is:
// see bootstrapPathFor.)
func renderBootstrap(a *agent) ([]byte, error) {
	cfg := a.bootstrapConfig()
	tmpl := a.env.BootstrapTemplate
	if tmpl == "" {
		tmpl = a.flags.templateFile
	}
	var data []byte
	var err error
	if tmpl != "" {
		data, err = bootstrap.RenderTemplate(cfg, tmpl)
	} else {
		data, err = bootstrap.Render(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("rendering Envoy bootstrap: %w", err)
	}
	return data, nil
}

// bootstrapPathFor is the file Envoy starts from: the ProxyConfig's customConfigFile, used as
// is, or the rendered <configPath>/envoy-rev.json.
func bootstrapPathFor(a *agent) (path string, render bool) {
	if f := a.proxyConfig.GetCustomConfigFile(); f != "" {
		return f, false
	}
	return filepath.Join(a.settings.ConfigPath, bootstrapFileName), true
}

// agentLifecycle is what the status server's /drain and /quitquitquit do.
type agentLifecycle struct{ a *agent }

func (l agentLifecycle) Drain(ctx context.Context) error {
	if l.a.envoy == nil {
		return nil
	}
	return l.a.envoy.Drain(ctx)
}

func (l agentLifecycle) Quit() {
	if l.a.envoy != nil {
		l.a.envoy.Quit()
	}
	l.a.shutdown()
}
