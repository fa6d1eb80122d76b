package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/wingman-mesh/wingman/internal/istiolog"
)

// rootFlags are Istio's root (logging) flags, accepted on every sub-command.
type rootFlags struct {
	outputLevel, stacktraceLevel, caller string
	target                               []string
	asJSON                               bool
	rotate                               string
	rotateMaxAge, rotateMaxSize          int
	rotateMaxBackups, vklog              int
}

// logScopes are the scopes the agent logs in (Istio's names; internal/istiolog), with "all".
var logScopes = []string{istiolog.AllScopes, istiolog.ScopeCA, istiolog.ScopeCache, istiolog.ScopeCitadelClient,
	istiolog.DefaultScope, istiolog.ScopeDNS, istiolog.ScopeGCECred, istiolog.ScopeGRPC, istiolog.ScopeHealthCheck,
	istiolog.ScopeKlog, istiolog.ScopeProbes, istiolog.ScopeSDS, istiolog.ScopeWasm, istiolog.ScopeXDSProxy}

// rootValueFlags are root flags that take a value (for finding the sub-command).
var rootValueFlags = map[string]bool{
	"--log_output_level": true, "--log_stacktrace_level": true, "--log_caller": true, "--log_target": true,
	"--log_rotate": true, "--log_rotate_max_age": true, "--log_rotate_max_size": true,
	"--log_rotate_max_backups": true, "--vklog": true,
}

func newRootFlagSet(name string) (*pflag.FlagSet, *rootFlags) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	r := &rootFlags{}
	// Istio's pkg/log flags (options.go AttachFlags at 1.30.3); --log_target is a string array
	// there (no comma splitting), and --log_output_level's own default is empty: the defaults
	// "default:info,grpc:none" always come first.
	fs.StringVar(&r.outputLevel, "log_output_level", "",
		"Comma-separated minimum per-scope logging level of messages to output, in the form of <scope>:<level>,<scope>:<level>,... where scope can be one of ["+
			strings.Join(logScopes, ", ")+"] and level can be one of [debug, info, warn, error, fatal, none]")
	fs.StringVar(&r.stacktraceLevel, "log_stacktrace_level", istiolog.DefaultStackTraceLevels,
		"Comma-separated minimum per-scope logging level at which stack traces are captured, in the form of <scope>:<level>,<scope:level>,...")
	fs.StringVar(&r.caller, "log_caller", "", "Comma-separated list of scopes for which to include caller information")
	fs.StringArrayVar(&r.target, "log_target", []string{"stdout"}, "The set of paths where to output the log. This can be any path as well as the special values stdout and stderr")
	fs.BoolVar(&r.asJSON, "log_as_json", false, "Whether to format output as JSON or in plain console-friendly format")
	// Istio's agent since 1.24 has no --log_rotate* flags and ignores them as unknown flags.
	fs.StringVar(&r.rotate, "log_rotate", "", "ignored, as by Istio's agent since 1.24 (log rotation was removed)")
	fs.IntVar(&r.rotateMaxAge, "log_rotate_max_age", 30, "ignored, as by Istio's agent since 1.24")
	fs.IntVar(&r.rotateMaxSize, "log_rotate_max_size", 104857600, "ignored, as by Istio's agent since 1.24")
	fs.IntVar(&r.rotateMaxBackups, "log_rotate_max_backups", 1000, "ignored, as by Istio's agent since 1.24")
	for _, n := range []string{"log_rotate", "log_rotate_max_age", "log_rotate_max_size", "log_rotate_max_backups"} {
		fs.Lookup(n).Hidden = true
	}
	fs.IntVar(&r.vklog, "vklog", 0, "number for the log level verbosity. Like -v flag. ex: --vklog=9 (klog scope at debug; nothing in the agent logs through klog)")
	return fs, r
}

// splitCommand finds the sub-command among args (root flags may come first) and returns it with
// the remaining arguments.
func splitCommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") {
			if rootValueFlags[a] {
				i++ // its value
			}
			continue
		}
		return a, append(append([]string(nil), args[:i]...), args[i+1:]...)
	}
	return "", args
}

type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

func errUnknownCommand(name string) error {
	return usageErr{fmt.Sprintf("unknown command %q for \"pilot-agent\"", name)}
}

func isHelp(err error) bool { return errors.Is(err, pflag.ErrHelp) }

func usageError(sio stdio, cmd string, err error) int {
	fmt.Fprintf(sio.err, "Error: %v\nRun '%s --help' for usage.\n", err, cmd)
	return exitUsage
}

func rootUsage(w io.Writer) {
	fs, _ := newRootFlagSet("pilot-agent")
	fmt.Fprintf(w, `Wingman pilot-agent runs in the sidecar or gateway container and bootstraps Envoy
(a drop-in replacement for Istio's pilot-agent).

Usage:
  pilot-agent [command]

Available Commands:
  proxy       XDS proxy agent: runs Envoy and the services it needs
  bootstrap   Prints (or with --validate checks) the Envoy bootstrap the agent would write
  request     Makes an HTTP request to Envoy's admin API or the agent's status port
  wait        Waits until the Envoy proxy is ready
  version     Prints out build version information
  istio-iptables
              Sets up the pod's traffic capture (iptables or native nftables)
  istio-clean-iptables
              Removes the traffic capture (istio-iptables --cleanup-only)
  help        Help about any command

Flags:
%s
Use "pilot-agent [command] --help" for more information about a command.
%s`, fs.FlagUsages(), exitCodesHelp)
}

func runHelp(args []string, sio stdio) int {
	if len(args) == 0 {
		rootUsage(sio.out)
		return 0
	}
	if strings.HasPrefix(args[0], "-") && args[0] != "-" {
		if args[0] == "-h" || args[0] == "--help" {
			rootUsage(sio.out)
			return 0
		}
		return usageError(sio, "pilot-agent help", fmt.Errorf("unknown flag: %s", args[0]))
	}
	switch args[0] {
	case "proxy":
		proxyUsage(sio.out)
	case "bootstrap":
		return runBootstrap(context.Background(), []string{"--help"}, nil, sio)
	case "help":
		rootUsage(sio.out)
	case "request":
		fs, _ := requestFlagSet()
		commandUsage(sio.out, "request <method> <path> [<body>]", "Makes an HTTP request to Envoy's admin API", fs)
	case "wait":
		fs, _ := waitFlagSet()
		commandUsage(sio.out, "wait", "Waits until the Envoy proxy is ready", fs)
	case "version":
		fs, _, _ := versionFlagSet()
		commandUsage(sio.out, "version", "Prints out build version information", fs)
	case "istio-iptables", "istio-clean-iptables":
		fs, _ := iptablesFlagSet(args[0] == "istio-clean-iptables")
		iptablesUsage(sio.out, fs)
	default:
		return usageError(sio, "pilot-agent", errUnknownCommand(args[0]))
	}
	return 0
}

func commandUsage(w io.Writer, use, short string, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  pilot-agent %s [flags]\n\nFlags:\n%s%s", short, use, fs.FlagUsages(), exitCodesHelp)
}

// newLogger configures the agent's logging from the root flags as Istio's log.Configure does
// (internal/istiolog): Istio's line format, scopes and levels. The caller closes the Logs.
func (r *rootFlags) newLogger(sio stdio) (*istiolog.Logs, error) {
	logs, err := istiolog.New(istiolog.Options{
		OutputLevels: r.outputLevel, StackTraceLevels: r.stacktraceLevel, Callers: r.caller,
		Targets: r.target, JSON: r.asJSON, KlogVerbose: r.vklog != 0,
	}, sio.out, sio.err)
	if err != nil {
		return nil, usageErr{err.Error()}
	}
	if r.rotate != "" || r.rotateMaxAge != 30 || r.rotateMaxSize != 104857600 || r.rotateMaxBackups != 1000 {
		// Istio dropped log rotation in 1.24 (#52451); its agent takes the flags as unknown ones and
		// ignores them (cmd.go FParseErrWhitelist at 1.30.3). Said once rather than silently.
		logs.Logger(istiolog.DefaultScope).Warn("--log_rotate* flags are ignored, as Istio's agent ignores them since 1.24 (log rotation was removed)")
	}
	return logs, nil
}
