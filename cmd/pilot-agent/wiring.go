package main

// The wiring: each part of the agent built from the resolved agent (the one parsed environment,
// the effective ProxyConfig and what was decided from them), as lifecycle services in Istio's
// start order.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/wingman-mesh/wingman/bootstrap"
	"github.com/wingman-mesh/wingman/bootstrap/proxyconfig"
	"github.com/wingman-mesh/wingman/certs"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/lifecycle"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/dns"
	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/istiolog"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
	"github.com/wingman-mesh/wingman/mux"
	"github.com/wingman-mesh/wingman/status"
	"github.com/wingman-mesh/wingman/status/health"
	"github.com/wingman-mesh/wingman/supervisor"
	"github.com/wingman-mesh/wingman/transport/istiod"
)

const (
	annotationsFile = "./etc/istio/pod/annotations"
	sdsSocketDir    = "./var/run/secrets/workload-spiffe-uds"
	resolvConfPath  = "/etc/resolv.conf"
)

// processStart is when the agent began, for startup_duration_seconds.
var processStart = time.Now()

// resolveProxyConfig layers the ProxyConfig as Istio does (defaults, mesh file, PROXY_CONFIG,
// the proxy.istio.io/config annotation), then changes it as Istio's ConstructProxyConfig does
// (pilot/cmd/pilot-agent/config/config.go, identical 1.28.10 .. master) before anything reads it:
// concurrency from ISTIO_CPU_LIMIT and the legacy --concurrency flag (applyConcurrency), and
// statsdUdpAddress resolved to ip:port, or cleared with a warning when it does not resolve. So the
// PROXY_CONFIG node metadata shows both as Istio's agent sends them; and, as the proxy command
// of pilot/cmd/pilot-agent/app/cmd.go then does (every tag), --templateFile becomes the
// ProxyConfig's proxyBootstrapTemplatePath unless customConfigFile is set. It returns the
// ProxyConfig and the settings the wiring needs.
func resolveProxyConfig(ctx context.Context, pf *proxyFlags, env *options.Env,
	log *slog.Logger) (*meshapi.ProxyConfig, proxySettings, error) {
	pc, err := proxyconfig.Load(proxyconfig.Sources{MeshConfigFile: pf.meshConfig,
		ProxyConfigEnv: env.ProxyConfig, AnnotationsFile: annotationsFile, Logger: log})
	if err != nil {
		return nil, proxySettings{}, err
	}
	applyConcurrency(pc, pf.concurrency, env.CPULimit, log)
	if a := pc.GetStatsdUdpAddress(); a != "" {
		resolved, err := bootstrap.ResolveStatsdAddress(ctx, a, nil, 0)
		if ctx.Err() != nil {
			return nil, proxySettings{}, ctx.Err()
		}
		pc.StatsdUdpAddress = ""
		if err != nil {
			log.Warn("resolve StatsdUdpAddress failed", "statsdUdpAddress", a, "error", err)
		} else if resolved.IsValid() {
			pc.StatsdUdpAddress = resolved.String()
		}
	}
	if pf.templateFile != "" && pc.GetCustomConfigFile() == "" {
		pc.ProxyBootstrapTemplatePath = pf.templateFile
	}
	return pc, settingsOf(pc), nil
}

// settingsOf extracts what the CLI wiring itself needs from the effective ProxyConfig.
func settingsOf(pc *meshapi.ProxyConfig) proxySettings {
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
// xDS proxy, the gRPC bootstrap, the status server (whose /drain and /quitquitquit reach envoy,
// nil without Envoy). Envoy is appended after them by buildParts.
func partServices(a *agent, envoy *supervisor.Supervisor) ([]lifecycle.Service, error) {
	env, s := a.env, a.settings
	reg, prefixed := status.NewAgentRegistry()
	var services []lifecycle.Service

	var dnsServer *dns.Server
	if dns.Enabled(env.DNSCapture, a.identity.Type, env.EnableDNSServer) {
		dnsCfg, warn := dns.Config{
			Addr: env.DNSProxyAddr, ResolvConf: resolvConfPath, Namespace: env.PodNamespace,
			Domain: a.identity.DNSDomain, ForwardTimeout: env.DNSForwardTimeout, ForwardParallel: env.DNSForwardParallel,
			AutoAllocate: env.Meta["DNS_AUTO_ALLOCATE"] == "true",
			Logger:       a.logger(istiolog.ScopeDNS), Registerer: reg,
		}.Port53(os.Getuid(), dns.AltResolvConf)
		if warn != "" {
			a.log.Error(warn)
		}
		var err error
		if dnsServer, err = dns.New(dnsCfg); err != nil {
			return nil, err
		}
		services = append(services, lifecycle.Service{Name: "dns", Run: dnsServer.Run, KeepDuringDrain: true})
	}

	if cred, err := credentialService(a); err != nil {
		return nil, err
	} else if cred != nil {
		services = append(services, *cred)
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
	ls := a.lastState(reg, manager, dnsServer) // laststate.go
	if svc := ls.service(manager); svc != nil {
		services = append(services, *svc)
	}
	proxy, err := a.xdsProxy(reg, manager, dnsServer, rewriteECDS, ls)
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

	var envoyReady health.Prober
	if s.StatusPort != 0 {
		stCfg := a.statusConfig(agentLifecycle{envoy: envoy, shutdown: a.shutdown}, reg, prefixed)
		if dnsServer != nil {
			stCfg.DNSEnabled, stCfg.DNS, stCfg.NDSZ = true, dnsServer, dnsServer.NDSZ
		}
		st, err := status.New(stCfg)
		if err != nil {
			return nil, err
		}
		services = append(services, lifecycle.Service{Name: "status", Run: st.Run})
		if !env.DisableEnvoy {
			envoyReady = health.ProberFunc(st.CheckReady)
		}
	}
	if hs, err := healthService(a, proxy, envoyReady); err != nil {
		return nil, err
	} else if hs != nil {
		services = append(services, *hs)
	}
	return services, nil
}

// sdsSocketPath is where Envoy's SDS is served.
func sdsSocketPath(env *options.Env) string {
	socketFile := env.WorkloadIdentitySocketFile
	if socketFile == "" {
		socketFile = "socket"
	}
	return filepath.Join(sdsSocketDir, socketFile)
}

// statusConfig is the status server's configuration from the agent's settings.
func (a *agent) statusConfig(lc status.Lifecycle, reg, prefixed *metric.Registry) status.Config {
	env, s := a.env, a.settings
	c := status.Config{
		Port: s.StatusPort, AdminPort: s.ProxyAdminPort, EnvoyPrometheusPort: env.EnvoyPrometheusPort,
		NoEnvoy: env.DisableEnvoy, SkipEnvoyStats: !env.MergeEnvoyStats, NodeType: a.identity.Type,
		AppProbers: env.KubeAppProbers, DisableHTTP2Probing: !env.EnableHTTP2Probing,
		ProbeKeepAlive: env.EnableProbeKeepalive, PrometheusAnnotations: env.PrometheusAnnotations,
		MetricsLocalhostOnly: env.MetricsLocalhostAccessOnly, Profiling: a.flags.profiling,
		GRPCBootstrapPath: env.GRPCXDSBootstrap, CheckGRPCBootstrap: bootstrap.ProbeGRPCBootstrap,
		Lifecycle: lc, Gatherer: reg, Registerer: prefixed, ProcessStart: processStart,
		Logger: a.log, ProbeLogger: a.logger(istiolog.ScopeProbes), // Istio's status server: default and probes
	}
	c.ProbeTargetHost = status.ProbeTarget(env.InstanceIP, env.RewriteProbeLegacyLocalhost)
	c.LocalHost = a.statusLocalHost()
	return c
}

// probeSDSSocket decides, as Istio does, whether another SDS server (SPIRE) already answers on
// the SDS socket at path; then the agent serves only file certificates. Both the certificate
// parts and the bootstrap (file-credential metadata) depend on it.
func probeSDSSocket(path string, log *slog.Logger) (serveOnlyFiles bool) {
	serveOnlyFiles, err := certs.ProbeSDSSocket(path, time.Second)
	if err != nil {
		log.Warn("probing the SDS socket failed", "path", path, "error", err)
	}
	return serveOnlyFiles
}

// certParts builds the secret manager and, unless Envoy is disabled, the SDS server.
func (a *agent) certParts(reg *metric.Registry) (*certs.Manager, *certs.Server, error) {
	env, s := a.env, a.settings
	sdsPath := sdsSocketPath(env)
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
		Logger: a.logger(istiolog.ScopeCache), SDSLogger: a.logger(istiolog.ScopeSDS), Registerer: reg,
	}
	if env.ECCSignatureAlgorithm == "ECDSA" {
		cfg.KeyType = certs.KeyECDSA
	}
	if env.EnableCACRL {
		cfg.CRLPath = certs.DefaultCRLPath
	}
	cfg.CompliancePolicy = env.CompliancePolicy
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
func (a *agent) xdsProxy(reg *metric.Registry, m *certs.Manager, d *dns.Server, rewriteECDS mux.Rewriter, ls lastStateParts) (*mux.Proxy, error) {
	env, s := a.env, a.settings
	up := mux.UpstreamConfig{
		Address: s.DiscoveryAddress, Plaintext: s.ControlPlaneAuthPolicy == "NONE",
		TokenFile: tokenPath, KeepaliveTime: env.GRPCKeepaliveInterval, KeepaliveTimeout: env.GRPCKeepaliveTimeout,
		ServerName: istiod.ServerName(s.DiscoveryAddress, env.IstiodSAN),
		ClusterID:  env.ClusterID, Metadata: env.XDSHeaders, CompliancePolicy: env.CompliancePolicy,
	}
	if !up.IsPlaintext() {
		root, err := xdsRootPath(env)
		if err != nil {
			return nil, err
		}
		up.RootCAFile = root
		switch {
		case env.ProvCert != "": // as Istio's GetKeyCertsForXDS
			up.ClientCertificate = istiod.FileClientCertificate(filepath.Join(env.ProvCert, "cert-chain.pem"),
				filepath.Join(env.ProvCert, "key.pem"), time.Now)
		case env.FileMountedCerts:
			chain, key := tlsClientSetting(env, a.proxyConfig, "ISTIO_META_TLS_CLIENT_CERT_CHAIN"), tlsClientSetting(env, a.proxyConfig, "ISTIO_META_TLS_CLIENT_KEY")
			if chain != "" && key != "" {
				up.ClientCertificate = istiod.FileClientCertificate(chain, key, time.Now)
			}
		case m != nil:
			up.ClientCertificate = m.GetClientCertificate
		}
	}
	agentTypes := a.agentTypes(m, d, ls)
	var rewriters map[string]mux.Rewriter
	if rewriteECDS != nil {
		rewriters = map[string]mux.Rewriter{fastpath.ExtensionConfigType: rewriteECDS}
	}
	cfg := mux.Config{
		SocketPath: filepath.Join(s.ConfigPath, "XDS"), Upstream: up, AgentTypes: agentTypes, Rewriters: rewriters,
		MaxMessageBytes: env.XDSMaxMessageBytes, CloseOnUpstreamLoss: env.XDSCloseOnUpstreamLoss,
		ReportHealth: a.proxyConfig.GetReadinessProbe() != nil,
		Downstream: mux.DownstreamLimits{MaxRecvMsgBytes: env.GRPCMaxRecvMsgSize, MaxConcurrentStreams: uint32(env.GRPCMaxStreams),
			KeepaliveTime: env.GRPCKeepaliveInterval, KeepaliveTimeout: env.GRPCKeepaliveTimeout},
		Logger: a.logger(istiolog.ScopeXDSProxy), Registerer: reg,
	}
	ls.apply(&cfg)
	return mux.New(cfg)
}

// agentTypes are the agent's own subscriptions: NDS for the DNS proxy d (recorded with
// WINGMAN_LAST_STATE), PCDS for the certificates.
func (a *agent) agentTypes(m *certs.Manager, d *dns.Server, ls lastStateParts) map[string]mux.Handler {
	agentTypes := map[string]mux.Handler{}
	if d != nil {
		agentTypes[fastpath.NameTableType] = ls.nameTableHandler(d) // laststate.go
	}
	if a.env.ProxyConfigXDSAgent && m != nil {
		agentTypes[fastpath.ProxyConfigType] = pcdsHandler(m)
	}
	return agentTypes
}

// bootstrapConfig is the bootstrap package's view of the agent.
func (a *agent) bootstrapConfig() bootstrap.Config {
	env := a.env
	c := bootstrap.NewConfig()
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
	c.FIPS = a.fips
	c.OutlierLogPath = a.flags.outlierLogPath
	c.FileCredential = a.serveOnlyFiles
	c.Logger = a.log
	bootstrapFacts(a, &c)
	return c
}

// prerender renders Envoy's bootstrap on its own goroutine, overlapping the start of the other
// parts; the returned function waits for the result (the caller must call it once).
func prerender(ctx context.Context, a *agent) func() ([]byte, error) {
	var data []byte
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err = renderBootstrap(ctx, a)
	}()
	return func() ([]byte, error) {
		<-done
		d := data
		data = nil // once written, the bootstrap is not kept (the closure lives as long as the agent)
		return d, err
	}
}

// renderBootstrap renders Envoy's bootstrap from the template ISTIO_BOOTSTRAP, --templateFile or
// proxyBootstrapTemplatePath names, else the image's own (bootstrap.RenderEffective: the typed
// render when the image has none). (A customConfigFile is handed to Envoy as is: see
// bootstrapPathFor.)
func renderBootstrap(ctx context.Context, a *agent) ([]byte, error) {
	cfg := a.bootstrapConfig()
	tmpl := bootstrap.EffectiveTemplatePath(a.env.BootstrapTemplate, a.flags.templateFile, a.proxyConfig)
	data, err := bootstrap.RenderEffective(ctx, cfg, tmpl)
	if err != nil {
		return nil, fmt.Errorf("rendering Envoy bootstrap: %w", err)
	}
	return data, nil
}

// bootstrapPathFor is the file Envoy starts from: the ProxyConfig's customConfigFile, used as
// is, or the rendered <configPath>/envoy-rev.json.
func bootstrapPathFor(pc *meshapi.ProxyConfig, configPath string) (path string, render bool) {
	if f := pc.GetCustomConfigFile(); f != "" {
		return f, false
	}
	return filepath.Join(configPath, bootstrapFileName), true
}

// agentLifecycle is what the status server's /drain and /quitquitquit do.
type agentLifecycle struct {
	envoy    *supervisor.Supervisor // nil without Envoy
	shutdown context.CancelFunc
}

func (l agentLifecycle) Drain(ctx context.Context) error {
	if l.envoy == nil {
		return nil
	}
	return l.envoy.Drain(ctx)
}

func (l agentLifecycle) Quit() {
	if l.envoy != nil {
		l.envoy.Quit()
	}
	l.shutdown()
}
