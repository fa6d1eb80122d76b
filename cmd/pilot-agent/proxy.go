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

	"github.com/wingman-mesh/wingman/bootstrap"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/lifecycle"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/node"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/platform"
	"github.com/wingman-mesh/wingman/internal/istiolog"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
	"github.com/wingman-mesh/wingman/status"
	"github.com/wingman-mesh/wingman/supervisor"
	"github.com/wingman-mesh/wingman/transport/istiod"
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
	// Unknown flags are refused (exit 2 naming the flag), where Istio's proxy command tolerates
	// them (cobra FParseErrWhitelist): a misspelt flag would otherwise be silently ignored.
	fs, r := newRootFlagSet("proxy")
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
  pilot-agent proxy [%s] [flags]

Flags (an unknown flag is a usage error, exit 2):
%s`, nodeTypeChoice(), fs.FlagUsages())
	options.WriteHelp(w)
	fmt.Fprint(w, exitCodesHelp)
}

// nodeTypeList joins bootstrap.NodeTypes, the node types the proxy and bootstrap commands accept,
// print in their usage and name in errors, with sep.
func nodeTypeList(sep string) string {
	names := make([]string, len(bootstrap.NodeTypes))
	for i, t := range bootstrap.NodeTypes {
		names[i] = string(t)
	}
	return strings.Join(names, sep)
}

// nodeTypeChoice is the node types as a usage line writes them: sidecar|router|...
func nodeTypeChoice() string { return nodeTypeList("|") }

// agent is what the proxy command resolved before building anything: the parsed flags and
// environment, the effective ProxyConfig and every decision taken from them. Built once by
// resolveAgent; immutable afterwards.
type agent struct {
	flags           *proxyFlags
	root            *rootFlags
	env             *options.Env
	nodeType        string // sidecar, router, ...
	settings        proxySettings
	identity        node.Identity
	platform        *platform.Detection
	bootstrapPath   string
	proxyConfig     *meshapi.ProxyConfig // the effective ProxyConfig
	serveOnlyFiles  bool                 // another SDS server owns the socket (SPIRE)
	renderBootstrap bool                 // the bootstrap is rendered (not a customConfigFile)
	fips            bool                 // COMPLIANCE_POLICY is fips-140-2: Envoy's google_grpc stays on TLS 1.2
	dnsOnPort53     bool                 // root and the DNS proxy takes :53 (Envoy then runs as the proxy user)
	log             *slog.Logger         // the default scope
	logs            *istiolog.Logs
	// shutdown begins a graceful shutdown, as SIGTERM does.
	shutdown context.CancelFunc
}

// adminHost is where the bootstrap puts Envoy's admin listener (bootstrap.AddressFamily): the
// readiness and drain calls must reach it there, dual stack with an IPv6 INSTANCE_IP included.
func (a *agent) adminHost() string {
	return bootstrap.AddressFamily(a.identity.IPs, a.env.DualStack).Localhost
}

// statusLocalHost is where readiness reads Envoy's admin API: Istio's status server choice from
// the proxy's IP mode and INSTANCE_IP (status.AdminLocalhost).
func (a *agent) statusLocalHost() string {
	// Istio's IsIPv6Proxy: every proxy IP is IPv6, which is when the family without dual stack is IPv6.
	ipv6Only := bootstrap.AddressFamily(a.identity.IPs, false).Localhost == "::1"
	return status.AdminLocalhost(ipv6Only, a.env.InstanceIP.String())
}

// nodeID is the node id the bootstrap gives Envoy (bootstrap.NodeID over the discovered identity).
func (a *agent) nodeID() string {
	ip := ""
	if len(a.identity.IPs) > 0 {
		ip = a.identity.IPs[0]
	}
	return bootstrap.NodeID(bootstrap.NodeType(a.identity.Type), ip, a.env.PodName, a.env.PodNamespace, a.identity.DNSDomain)
}

// logger is the logger of one of Istio's scopes, for the part that writes what Istio's agent
// writes in that scope (internal/istiolog).
func (a *agent) logger(scope string) *slog.Logger {
	switch {
	case a.logs != nil:
		return a.logs.Logger(scope)
	case a.log != nil:
		return a.log
	}
	return slog.New(slog.DiscardHandler)
}

// runProxy is `pilot-agent proxy`: parse the command line and environment, resolve the agent's
// configuration once, build its parts, and run them until shutdown.
func runProxy(parent context.Context, args, environ []string, sio stdio) int {
	fs, root, pf := proxyFlagSet()
	if err := fs.Parse(args); err != nil {
		if isHelp(err) {
			proxyUsage(sio.out)
			return 0
		}
		return usageError(sio, "pilot-agent proxy", err)
	}
	nodeType, err := proxyNodeType(fs)
	if err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}
	env, err := options.Parse(environ)
	if err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}
	logs, err := root.newLogger(sio)
	if err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}
	defer logs.Close()
	log := logs.Logger(istiolog.DefaultScope)
	setMemoryLimit(env.MemLimitRatio, log)

	// Signals are caught before anything starts, so that an early SIGTERM is a clean stop.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	logFlags(parent, log, fs)

	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	a, err := resolveAgent(ctx, cancel, pf, root, env, nodeType, log)
	if err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}
	a.logs = logs
	defer a.platform.Close()
	p, err := buildParts(ctx, a, sio)
	if err != nil {
		return usageError(sio, "pilot-agent proxy", err)
	}
	defer p.wait()
	return runParts(ctx, a, p, sigs, sio)
}

// proxyNodeType is the proxy command's optional argument, Istio's node type.
func proxyNodeType(fs *pflag.FlagSet) (string, error) {
	nodeType := "sidecar"
	if fs.NArg() > 0 {
		nodeType = fs.Arg(0)
	}
	if !bootstrap.NodeType(nodeType).Valid() {
		return "", fmt.Errorf("invalid proxy Type: %s (want one of %s)", nodeType, nodeTypeList(", "))
	}
	return nodeType, nil
}

// setMemoryLimit sets GOMEMLIMIT from the cgroup memory limit (see applyMemoryLimit).
func setMemoryLimit(ratio float64, log *slog.Logger) {
	if limit, err := applyMemoryLimit(ratio, "/"); err != nil {
		log.Warn("cannot read the cgroup memory limit; GOMEMLIMIT left unset", "err", err)
	} else if limit > 0 {
		log.Info("GOMEMLIMIT set from the cgroup memory limit", "bytes", limit, "ratio", ratio)
	}
}

// logFlags logs the flags and the version as Istio's agent does at start (log pipelines built
// for istio-proxy read these lines); about 60 short writes.
func logFlags(ctx context.Context, log *slog.Logger, fs *pflag.FlagSet) {
	if !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	// As Istio's proxy command (pkg/cmd/cmd.go PrintFlags, then "Version" with
	// pkg/version BuildInfo.String, at 1.30.3): one line per flag, then the version.
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden { // the --log_rotate* flags Istio no longer has
			log.Info(fmt.Sprintf("FLAG: --%s=%q", f.Name, f.Value.String()))
		}
	})
	b := currentBuild()
	log.Info("Version " + b.Version + "-" + b.GitRevision + "-" + b.BuildStatus)
}

// resolveAgent settles everything the parts are built from: the effective ProxyConfig and
// settings, the preflight checks, the node identity (discovered on a goroutine, overlapping the
// rest), platform detection (started here, running in the background until a.platform.Close),
// the SDS socket probe and the bootstrap path.
func resolveAgent(ctx context.Context, shutdown context.CancelFunc, pf *proxyFlags, root *rootFlags,
	env *options.Env, nodeType string, log *slog.Logger) (*agent, error) {
	identity := make(chan node.Identity, 1)
	var discovery sync.WaitGroup
	defer discovery.Wait()
	discovery.Go(func() {
		identity <- node.Discover(ctx, node.Config{
			Type: nodeType, InstanceIP: env.InstanceIP, PodName: env.PodName, PodNamespace: env.PodNamespace,
			Domain: pf.domain, ExcludeInterfaces: excludedInterfaces(log),
		})
	})
	pc, settings, err := resolveProxyConfig(ctx, pf, env, log)
	if err == nil {
		if settings.ServiceCluster == "" {
			settings.ServiceCluster = pf.serviceCluster
		}
		log.Info("effective proxy config", "settings", settings)
		err = preflight(settings, env)
	}
	if err == nil {
		err = unsupported(env, pc)
	}
	if err == nil {
		err = checkConfigFiles(pf.templateFile, env, pc)
	}
	if err != nil {
		shutdown() // ends the discovery at once; nothing else has started
		return nil, err
	}

	detection := platform.Start(ctx, platformConfig(env))
	id := <-identity
	log.Info("proxy role", "ips", id.IPs, "type", nodeType, "id", id.ID, "domain", id.DNSDomain)
	serveOnlyFiles := probeSDSSocket(sdsSocketPath(env), log)
	var bootstrapPath string
	var render bool
	if !env.DisableEnvoy {
		bootstrapPath, render = bootstrapPathFor(pc, settings.ConfigPath)
	}
	return &agent{flags: pf, root: root, env: env, nodeType: nodeType, settings: settings, identity: id,
		platform: detection, bootstrapPath: bootstrapPath, proxyConfig: pc, serveOnlyFiles: serveOnlyFiles,
		renderBootstrap: render, fips: fipsPolicy(env.CompliancePolicy),
		dnsOnPort53: os.Getuid() == 0 && strings.HasSuffix(env.DNSProxyAddr, ":53"),
		log:         log, shutdown: shutdown}, nil
}

// compliance is what COMPLIANCE_POLICY asks of Envoy and the agent, as transport/istiod spells
// out the policies; options.Parse has refused any name that package does not know, so the
// zero Compliance (no policy) is only ever returned for "".
func compliance(policy string) istiod.Compliance {
	c, _ := istiod.CompliancePolicy(policy)
	return c
}

// fipsPolicy reports whether COMPLIANCE_POLICY keeps Envoy's google_grpc on TLS 1.2.
func fipsPolicy(policy string) bool { return compliance(policy).GoogleGRPCTLS12Only }

// parts are the agent's services, Envoy last, and Envoy's supervisor (nil without Envoy).
type parts struct {
	services []lifecycle.Service
	envoy    *supervisor.Supervisor
	// wait waits for the bootstrap render goroutine, if one was started; call it once done.
	wait func()
}

// buildParts builds every part. Envoy's bootstrap is rendered on its own goroutine from here,
// overlapping the set-up of the other parts; Envoy's Start waits for it.
func buildParts(ctx context.Context, a *agent, sio stdio) (parts, error) {
	p := parts{wait: func() {}}
	var rendered func() ([]byte, error)
	if a.renderBootstrap {
		rendered = prerender(ctx, a)
		p.wait = func() { _, _ = rendered() }
	}
	var err error
	if !a.env.DisableEnvoy {
		if p.envoy, err = supervisor.New(a.supervisorConfig(sio)); err != nil {
			p.wait()
			return parts{}, err
		}
	}
	if p.services, err = partServices(a, p.envoy); err != nil {
		p.wait()
		return parts{}, err
	}
	if p.envoy != nil {
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
		p.services = append(p.services, lifecycle.Service{Name: "envoy", Start: start, Run: p.envoy.Run})
	}
	return p, nil
}

// runParts runs the parts until shutdown and returns the process exit code: Envoy's when it
// exited on its own. The first SIGTERM/SIGINT begins a graceful shutdown; a second one cuts
// Envoy's drain short (Istio ignores it).
func runParts(ctx context.Context, a *agent, p parts, sigs <-chan os.Signal, sio stdio) int {
	var wg sync.WaitGroup
	stopSignals := make(chan struct{})
	wg.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stopSignals:
				return
			case s := <-sigs:
				if n == 0 {
					a.log.Info("received signal, shutting down gracefully", "signal", s.String())
					a.shutdown()
				} else if p.envoy != nil {
					a.log.Info("received another signal, stopping envoy now", "signal", s.String())
					p.envoy.Quit()
				}
			}
		}
	})
	err := lifecycle.Run(ctx, a.log, p.services)
	close(stopSignals)
	wg.Wait()

	var exit *supervisor.ExitError
	switch {
	case errors.As(err, &exit):
		a.log.Info("agent exiting with envoy's exit code", "code", exit.Code)
		return exit.Code
	case err != nil:
		a.log.Error("agent failed", "error", err)
		fmt.Fprintf(sio.err, "Error: %v\n", err)
		return exitFailure
	}
	a.log.Info("agent has successfully terminated")
	return 0
}

func (a *agent) supervisorConfig(sio stdio) supervisor.Config {
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
	if suites := compliance(env.CompliancePolicy).EnvoyCipherSuites; suites != "" {
		envoyEnv = append(envoyEnv[:len(envoyEnv):len(envoyEnv)], "GRPC_SSL_CIPHER_SUITES="+suites)
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
		RunAsProxyUser:              a.dnsOnPort53,
		Stdout:                      file(sio.out),
		Stderr:                      file(sio.err),
		ReapOrphans:                 os.Getpid() == 1,
		AdminHost:                   a.adminHost(),
		AdminPort:                   s.ProxyAdminPort,
		Sidecar:                     a.nodeType == "sidecar",
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
