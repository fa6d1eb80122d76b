package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/wingman-mesh/wingman/bootstrap"
	"github.com/wingman-mesh/wingman/bootstrap/envoyproto"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/node"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/platform"
)

// runBootstrap is `pilot-agent bootstrap [node type] [--validate] [proxy flags]`: it prints
// the Envoy bootstrap the agent would write for this environment, with ISTIO_BOOTSTRAP_OVERRIDE
// merged the way Envoy merges --config-yaml. A custom template whose output is not JSON (YAML for
// *.yaml templates) is an error, exit 1. With --validate it checks it as Envoy would at start
// (strict proto parse, field rules where the build has them, static-cluster references) and
// exits 1 with one finding per line naming the field path.
func runBootstrap(ctx context.Context, args, environ []string, sio stdio) int {
	fs, root, pf := proxyFlagSet()
	validate := fs.Bool("validate", false, "check the bootstrap as Envoy would at start; exit 1 with findings")
	if err := fs.Parse(args); err != nil {
		if isHelp(err) {
			fmt.Fprintf(sio.out, "Prints the Envoy bootstrap the agent would write.\n\nUsage:\n  pilot-agent bootstrap [%s] [--validate] [proxy flags]\n\nFlags:\n%s%s", nodeTypeChoice(), fs.FlagUsages(), exitCodesHelp)
			return 0
		}
		return usageError(sio, "pilot-agent bootstrap", err)
	}
	nodeType, err := proxyNodeType(fs)
	if err != nil {
		return usageError(sio, "pilot-agent bootstrap", err)
	}
	env, err := options.Parse(environ)
	if err != nil {
		return usageError(sio, "pilot-agent bootstrap", err)
	}
	log := slog.New(slog.DiscardHandler)
	pc, settings, err := resolveProxyConfig(ctx, pf, env, log)
	if err != nil {
		return usageError(sio, "pilot-agent bootstrap", err)
	}
	a := &agent{flags: pf, root: root, env: env, nodeType: nodeType, settings: settings, proxyConfig: pc,
		fips: fipsPolicy(env.CompliancePolicy), log: log, platform: platform.Start(ctx, platformConfig(env)),
		identity: node.Discover(ctx, node.Config{Type: nodeType, InstanceIP: env.InstanceIP, PodName: env.PodName,
			PodNamespace: env.PodNamespace, Domain: pf.domain})}
	defer a.platform.Close()
	data, err := renderBootstrap(ctx, a)
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
		// Template parameters the stamped Istio release does not pass: rendered as a missing key
		// (text/template's "<no value>"), listed so a newer template is seen before it is run.
		if tmpl := bootstrap.EffectiveTemplatePath(env.BootstrapTemplate, pf.templateFile, pc); templateInUse(tmpl) {
			cfg := a.bootstrapConfig()
			unknown, err := bootstrap.TemplateUnknownParams(cfg, tmpl)
			if err != nil {
				fmt.Fprintf(sio.err, "Error: %v\n", err)
				return exitFailure
			}
			rel, _ := bootstrap.ReleaseOf(cfg.IstioVersion)
			for _, u := range unknown {
				fmt.Fprintf(sio.err, "warning: %s: template parameter %q is not one Istio %s passes; rendered as a missing key (<no value>)\n", u.Location, u.Name, rel)
			}
		}
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

// templateInUse says whether the render used the template at p: a custom path always; Istio's own
// path only when the image ships a file there (else the built-in render was used).
func templateInUse(p string) bool {
	if p == "" {
		return false
	}
	if bootstrap.IsDefaultTemplate(p) {
		_, err := os.Stat(p)
		return err == nil
	}
	return true
}
