package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/pflag"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/wingman-mesh/wingman/bootstrap"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/lifecycle"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/node"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/platform"
	"github.com/wingman-mesh/wingman/supervisor"
)

// proxyFlags are Istio's `proxy` flags (app/cmd.go addFlags).
type proxyFlags struct {
	domain, meshConfig, tokenManagerPlugin, serviceCluster string
	proxyLogLevel, proxyComponentLogLevel                  string
	templateFile, outlierLogPath                           string
	stsPort, concurrency                                   int
	profiling                                              bool
}

func proxyFlagSet() (*pflag.FlagSet, *rootFlags, *proxyFlags) {
	fs, r := newRootFlagSet("proxy", true) // unknown flags tolerated, as Istio does
	p := &proxyFlags{}
	fs.StringVar(&p.domain, "domain", "", "DNS domain suffix. If not provided uses ${POD_NAMESPACE}.svc.cluster.local")
	fs.StringVar(&p.meshConfig, "meshConfig", "./etc/istio/config/mesh",
		"file name for Istio mesh configuration; may be overridden by PROXY_CONFIG or the proxy.istio.io/config annotation")
	fs.IntVar(&p.stsPort, "stsPort", 0, "accepted for compatibility; only adds STS_PORT metadata (no STS server)")
	fs.StringVar(&p.tokenManagerPlugin, "tokenManagerPlugin", "", "accepted for compatibility; unused")
	fs.StringVar(&p.serviceCluster, "serviceCluster", "istio-proxy", "deprecated: service cluster when ProxyConfig has none")
	fs.StringVar(&p.proxyLogLevel, "proxyLogLevel", "warning",
		"Envoy log level (trace, debug, info, warning, error, critical, off); may include scopes, e.g. 'info,misc:error'")
	fs.StringVar(&p.proxyComponentLogLevel, "proxyComponentLogLevel", "",
		"Envoy component log levels, used when --proxyLogLevel has no scopes (deprecated)")
	fs.IntVar(&p.concurrency, "concurrency", 0, "legacy: Envoy worker threads, overrides ProxyConfig concurrency when non-zero")
	fs.StringVar(&p.templateFile, "templateFile", "", "Go template bootstrap config (ignored when customConfigFile is set)")
	fs.StringVar(&p.outlierLogPath, "outlierLogPath", "", "the log path for outlier detection")
	fs.BoolVar(&p.profiling, "profiling", true, "enable profiling via /debug/pprof on the status port")
	return fs, r, p
}

func proxyUsage(w io.Writer) {
	fs, _, _ := proxyFlagSet()
	fmt.Fprintf(w, `XDS proxy agent: renders Envoy's bootstrap, runs Envoy, and serves SDS, xDS, DNS and health.

Usage:
  pilot-agent proxy [sidecar|router|waypoint] [flags]

Flags (unknown flags are accepted and ignored, as Istio's agent does):
%s`, fs.FlagUsages())
	options.WriteHelp(w)
}

// validNodeTypes are Istio's application node types (pkg/model/proxy.go).
var validNodeTypes = []string{"sidecar", "router", "waypoint", "ztunnel", "agentgateway"}

// agent is what the proxy command resolved before starting anything. Immutable once built.
type agent struct {
	flags           *proxyFlags
	root            *rootFlags
	env             *options.Env
	settings        proxySettings
	identity        node.Identity
	platform        *platform.Detection
	envoy           *supervisor.Supervisor // nil with DISABLE_ENVOY
	bootstrapPath   string
	proxyConfig     *meshv1alpha1.ProxyConfig // the effective ProxyConfig
	serveOnlyFiles  bool                      // another SDS server owns the socket (SPIRE)
	renderBootstrap bool                      // the bootstrap is rendered (not a customConfigFile)
	log             *slog.Logger
	// shutdown begins a graceful shutdown, as SIGTERM does.
	shutdown context.CancelFunc
}

func (a *agent) adminHost() string {
	if a.identity.Mode == node.IPv6 {
		return "::1"
	}
	return "127.0.0.1"
}

func runProxy(parent context.Context, args, environ []string, sio stdio) int {
	fs, root, pf := proxyFlagSet()
	if err := fs.Parse(args); err != nil {
		if isHelp(err) {
			proxyUsage(sio.out)
			return 0
		}
		return usageError(sio, "pilot-agent proxy", err)
	}
	nodeType := "sidecar"
	if fs.NArg() > 0 {
		nodeType = fs.Arg(0)
	}
	if !contains(validNodeTypes, nodeType) {
		return usageError(sio, "pilot-agent proxy", fmt.Errorf("invalid proxy Type: %s (want one of %s)",
			nodeType, strings.Join(validNodeTypes, ", ")))
	}
	env, err := options.Parse(environ)
	if err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}
	log, closeLog, err := root.newLogger(sio)
	if err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}
	defer closeLog()
	if limit, err := applyMemoryLimit(env.MemLimitRatio, "/"); err != nil {
		log.Warn("cannot read the cgroup memory limit; GOMEMLIMIT left unset", "err", err)
	} else if limit > 0 {
		log.Info("GOMEMLIMIT set from the cgroup memory limit", "bytes", limit, "ratio", env.MemLimitRatio)
	}

	// Signals are caught before anything starts, so that an early SIGTERM is a clean stop.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	if log.Enabled(parent, slog.LevelInfo) {
		// One record (one write) rather than Istio's line per flag: this is on the start-up path.
		var b strings.Builder
		fs.VisitAll(func(f *pflag.Flag) { fmt.Fprintf(&b, " --%s=%q", f.Name, f.Value.String()) })
		log.Info("FLAGS:"+b.String(), "version", buildVersion())
	}

	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// Interface discovery (a few netlink round trips) overlaps the config resolution below.
	identity := make(chan node.Identity, 1)
	var discovery sync.WaitGroup
	defer func() { cancel(); discovery.Wait() }()
	discovery.Go(func() {
		identity <- node.Discover(ctx, node.Config{
			Type: nodeType, InstanceIP: env.InstanceIP, PodName: env.PodName, PodNamespace: env.PodNamespace,
			Domain: pf.domain, ExcludeInterfaces: excludedInterfaces(log),
		})
	})
	a := &agent{flags: pf, root: root, env: env, log: log, shutdown: cancel}
	if a.settings, err = resolveProxyConfig(a); err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}
	if a.settings.ServiceCluster == "" {
		a.settings.ServiceCluster = pf.serviceCluster
	}
	applyConcurrency(&a.settings, pf.concurrency, env.CPULimit, log.Warn)
	log.Info("effective proxy config", "settings", a.settings)
	if err := preflight(a.settings, env); err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}

	a.platform = platform.Start(ctx, platform.Config{CloudPlatform: env.CloudPlatform})
	defer a.platform.Close()
	a.identity = <-identity
	log.Info("proxy role", "ips", a.identity.IPs, "type", nodeType, "id", a.identity.ID, "domain", a.identity.DNSDomain)

	a.probeSDSSocket()
	// Envoy's bootstrap is rendered on its own goroutine from here, overlapping the set-up of
	// the other parts; Envoy's Start waits for it. It reads only what is settled by now.
	var rendered func() ([]byte, error)
	if !env.DisableEnvoy {
		a.bootstrapPath, a.renderBootstrap = bootstrapPathFor(a)
		if a.renderBootstrap {
			rendered = prerender(a)
			defer rendered() // the render goroutine is waited for on every path
		}
	}
	services, err := partServices(a)
	if err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}
	if !env.DisableEnvoy {
		if a.envoy, err = supervisor.New(a.supervisorConfig(nodeType, sio)); err != nil {
			return usageError(sio, "pilot-agent proxy", err)
		}
		var start func(context.Context) error
		if a.renderBootstrap {
			start = func(context.Context) error {
				data, err := rendered()
				if err != nil {
					return err
				}
				return bootstrap.WriteFile(a.bootstrapPath, data, 0o644)
			}
		}
		services = append(services, lifecycle.Service{Name: "envoy", Start: start, Run: a.envoy.Run})
	}
	services = append(services, trimService(log)) // last: once start-up is over

	// First SIGTERM/SIGINT: graceful shutdown. A second one cuts Envoy's drain short (Istio
	// ignores it).
	var wg sync.WaitGroup
	stopSignals := make(chan struct{})
	wg.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stopSignals:
				return
			case s := <-sigs:
				if n == 0 {
					log.Info("received signal, shutting down gracefully", "signal", s.String())
					cancel()
				} else if a.envoy != nil {
					log.Info("received another signal, stopping envoy now", "signal", s.String())
					a.envoy.Quit()
				}
			}
		}
	})
	err = lifecycle.Run(ctx, log, services)
	close(stopSignals)
	wg.Wait()

	var exit *supervisor.ExitError
	switch {
	case errors.As(err, &exit):
		log.Info("agent exiting with envoy's exit code", "code", exit.Code)
		return exit.Code
	case err != nil:
		log.Error("agent failed", "error", err)
		fmt.Fprintf(sio.err, "Error: %v\n", err)
		return exitFailure
	}
	log.Info("agent has successfully terminated")
	return 0
}

func (a *agent) supervisorConfig(nodeType string, sio stdio) supervisor.Config {
	env, s := a.env, a.settings
	override := ""
	if env.BootstrapOverride != "" {
		j, err := supervisor.BootstrapOverrideJSON(env.BootstrapOverride, env.HostIP)
		if err != nil {
			a.log.Warn("ignoring ISTIO_BOOTSTRAP_OVERRIDE", "error", err) // as Istio does
		} else {
			override = j
		}
	}
	envoyEnv := env.Environ
	if env.CompliancePolicy == "fips-140-2" || env.CompliancePolicy == "fips-140-3" {
		envoyEnv = append(envoyEnv[:len(envoyEnv):len(envoyEnv)], "GRPC_SSL_CIPHER_SUITES="+
			"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384")
	}
	if envoyEnv == nil {
		envoyEnv = []string{}
	}
	file := func(w io.Writer) *os.File {
		f, _ := w.(*os.File)
		return f
	}
	return supervisor.Config{
		BinaryPath:                  s.BinaryPath,
		BootstrapPath:               a.bootstrapPath,
		RemoveBootstrapOnExit:       a.renderBootstrap, // never delete a user's customConfigFile
		DrainDuration:               s.DrainDuration,
		NodeIPs:                     a.identity.IPs,
		FileFlushInterval:           s.FileFlushInterval,
		FileFlushMinSizeKB:          s.FileFlushMinSizeKB,
		LogLevel:                    a.flags.proxyLogLevel,
		ComponentLogLevel:           a.flags.proxyComponentLogLevel,
		SkipDeprecatedLogs:          env.EnvoySkipDeprecatedLogs,
		EnableCoreDump:              env.EnableCoreDump,
		ConfigYAML:                  override,
		Concurrency:                 s.Concurrency,
		Env:                         envoyEnv,
		RunAsProxyUser:              os.Getuid() == 0 && strings.HasSuffix(env.DNSProxyAddr, ":53"),
		Stdout:                      file(sio.out),
		Stderr:                      file(sio.err),
		ReapOrphans:                 os.Getpid() == 1,
		AdminHost:                   a.adminHost(),
		AdminPort:                   s.ProxyAdminPort,
		Sidecar:                     nodeType == "sidecar",
		TerminationDrainDuration:    s.TerminationDrainDuration,
		ExitOnZeroActiveConnections: env.ExitOnZeroActiveConnections,
		MinDrainDuration:            env.MinimumDrainDuration,
		MaxDrainDuration:            env.MaximumDrainDuration,
		ExcludedListenerPorts: []int{env.EnvoyStatusPort, env.EnvoyPrometheusPort,
			env.EnvoySecureMetricsPort, env.EnvoySecureMergedMetricsPort},
		Logger: a.log,
	}
}

// excludedInterfaces reads traffic.sidecar.istio.io/excludeInterfaces from the downward-API
// annotations file, when there is one.
func excludedInterfaces(log *slog.Logger) []string {
	b, err := os.ReadFile("./etc/istio/pod/annotations")
	if err != nil {
		return nil
	}
	m, err := node.ParseAnnotations(b)
	if err != nil {
		log.Warn("reading pod annotations for excluded interfaces failed", "error", err)
		return nil
	}
	return node.SplitList(m[node.ExcludeInterfacesAnnotation])
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
