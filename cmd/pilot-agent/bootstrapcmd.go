package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/wingman-mesh/wingman/bootstrap"
	"github.com/wingman-mesh/wingman/bootstrap/envoyproto"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/node"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
)

// runBootstrap is `pilot-agent bootstrap [sidecar|router] [--validate] [proxy flags]`: it prints
// the Envoy bootstrap the agent would write for this environment, with ISTIO_BOOTSTRAP_OVERRIDE
// merged the way Envoy merges --config-yaml. With --validate it checks it as Envoy would at start
// (strict proto parse, field rules where the build has them, static-cluster references) and
// exits 1 with one finding per line naming the field path.
func runBootstrap(ctx context.Context, args, environ []string, sio stdio) int {
	fs, root, pf := proxyFlagSet()
	validate := fs.Bool("validate", false, "check the bootstrap as Envoy would at start; exit 1 with findings")
	if err := fs.Parse(args); err != nil {
		if isHelp(err) {
			fmt.Fprintf(sio.out, "Prints the Envoy bootstrap the agent would write.\n\nUsage:\n  pilot-agent bootstrap [sidecar|router] [--validate] [proxy flags]\n\nFlags:\n%s%s", fs.FlagUsages(), exitCodesHelp)
			return 0
		}
		return usageError(sio, "pilot-agent bootstrap", err)
	}
	nodeType := "sidecar"
	if fs.NArg() > 0 {
		nodeType = fs.Arg(0)
	}
	if !contains(validNodeTypes, nodeType) {
		return usageError(sio, "pilot-agent bootstrap", fmt.Errorf("invalid proxy Type: %s", nodeType))
	}
	env, err := options.Parse(environ)
	if err != nil {
		return usageError(sio, "pilot-agent bootstrap", err)
	}
	a := &agent{flags: pf, root: root, env: env, log: slog.New(slog.DiscardHandler)}
	if a.settings, err = resolveProxyConfig(a); err != nil {
		return usageError(sio, "pilot-agent bootstrap", err)
	}
	a.identity = node.Discover(ctx, node.Config{Type: nodeType, InstanceIP: env.InstanceIP, PodName: env.PodName,
		PodNamespace: env.PodNamespace, Domain: pf.domain})
	data, err := renderBootstrap(a)
	if err == nil && env.BootstrapOverride != "" {
		var override []byte
		if override, err = bootstrap.LoadOverride(env.BootstrapOverride, env.Environ); err == nil {
			data, err = envoyproto.MergeOverride(data, override)
		}
	}
	if err != nil {
		fmt.Fprintf(sio.err, "Error: %v\n", err)
		return exitFailure
	}
	if *validate {
		findings := envoyproto.Validate(data)
		for _, f := range findings {
			fmt.Fprintln(sio.err, f.String())
		}
		if len(findings) > 0 {
			return 1
		}
		fmt.Fprintln(sio.err, "bootstrap is valid")
		return 0
	}
	fmt.Fprintln(sio.out, strings.TrimSpace(string(data)))
	return 0
}
