// Command pilot-agent is Wingman's drop-in replacement for Istio's sidecar agent. It accepts Istio's
// sub-commands, flags and environment: `proxy [sidecar|router|waypoint|ztunnel|agentgateway]`, `request`, `wait` and `version`, plus `bootstrap [--validate]`;
// `istio-iptables` (and Istio's older `istio-clean-iptables`) programs the pod's traffic capture
// (package capture).
//
// Exit codes: 0 on a clean stop; 2 for usage and configuration errors found before anything is
// started; Envoy's own exit code when Envoy exits by itself (Istio's agent exits 0 then); 255 for
// other failures (as Istio's agent).
package main

import (
	"context"
	"io"
	"os"
)

const (
	exitUsage   = 2
	exitFailure = 255
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// stdio is where a command writes.
type stdio struct{ out, err io.Writer }

// run dispatches to a sub-command and returns the exit code.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	sio := stdio{out: stdout, err: stderr}
	name, rest := splitCommand(args)
	switch name {
	case "proxy":
		return runProxy(ctx, rest, environ, sio)
	case "bootstrap":
		return runBootstrap(ctx, rest, environ, sio)
	case "request":
		return runRequest(ctx, rest, sio)
	case "wait":
		return runWait(ctx, rest, sio)
	case "version":
		return runVersion(rest, sio)
	case "help":
		return runHelp(rest, sio)
	case "istio-iptables", "istio-clean-iptables":
		return runIstioIptables(ctx, rest, environ, sio, name == "istio-clean-iptables")
	case "":
		// Root flags only: parse them (an unknown one is a usage error) and print help.
		fs, _ := newRootFlagSet("pilot-agent")
		if err := fs.Parse(rest); err != nil && !isHelp(err) {
			return usageError(sio, "pilot-agent", err)
		}
		rootUsage(sio.out)
		return 0
	}
	return usageError(sio, "pilot-agent", errUnknownCommand(name))
}
