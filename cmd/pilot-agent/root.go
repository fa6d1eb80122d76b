package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
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
	fs.StringVar(&r.outputLevel, "log_output_level", "default:info,grpc:none",
		"comma-separated minimum per-scope logging level, as <scope>:<level>; levels: debug, info, warn, error, fatal, none")
	fs.StringVar(&r.stacktraceLevel, "log_stacktrace_level", "default:none",
		"per-scope level at which stack traces are captured: only none is supported (other levels are refused at start)")
	fs.StringVar(&r.caller, "log_caller", "", "comma-separated scopes for which to include caller information (default or all: source file and line on every record)")
	fs.StringSliceVar(&r.target, "log_target", []string{"stdout"}, "output paths for logs: stdout, stderr or a file path")
	fs.BoolVar(&r.asJSON, "log_as_json", false, "output logs as JSON")
	fs.StringVar(&r.rotate, "log_rotate", "", "rotating log file: refused at start (not supported yet; use --log_target)")
	fs.IntVar(&r.rotateMaxAge, "log_rotate_max_age", 30, "maximum age in days of a log file (only with --log_rotate)")
	fs.IntVar(&r.rotateMaxSize, "log_rotate_max_size", 104857600, "maximum size in megabytes of a log file (only with --log_rotate)")
	fs.IntVar(&r.rotateMaxBackups, "log_rotate_max_backups", 1000, "maximum number of log file backups (only with --log_rotate)")
	fs.IntVar(&r.vklog, "vklog", 0, "klog verbosity (accepted; the agent writes nothing through klog)")
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

// newLogger builds the agent's logger from the root flags.
func (r *rootFlags) newLogger(sio stdio) (*slog.Logger, func(), error) {
	level, err := defaultLevel(r.outputLevel)
	if err != nil {
		return nil, nil, err
	}
	if r.rotate != "" {
		// Istio's agent also writes a rotating file; silently not doing so would lose the logs.
		return nil, nil, usageErr{fmt.Sprintf("--log_rotate=%s is not supported yet (use --log_target with a file path)", r.rotate)}
	}
	w, closeFn := sio.out, func() {}
	if len(r.target) > 0 {
		switch t := r.target[0]; t {
		case "stdout", "":
		case "stderr":
			w = sio.err
		default:
			f, err := os.OpenFile(t, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return nil, nil, fmt.Errorf("--log_target %s: %w", t, err)
			}
			w, closeFn = f, func() { f.Close() }
		}
	}
	if err := stacktraceNone(r.stacktraceLevel); err != nil {
		closeFn()
		return nil, nil, err
	}
	if level == levelNone {
		return slog.New(slog.DiscardHandler), closeFn, nil
	}
	opts := &slog.HandlerOptions{Level: level, AddSource: callerScopes(r.caller)}
	if r.asJSON {
		return slog.New(slog.NewJSONHandler(w, opts)), closeFn, nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), closeFn, nil
}

const levelNone = slog.Level(100)

// defaultLevel reads the "default" scope (or a bare level) of an Istio --log_output_level.
func defaultLevel(spec string) (slog.Level, error) {
	level := slog.LevelInfo
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		scope, lv, ok := strings.Cut(part, ":")
		if !ok {
			scope, lv = "default", part
		}
		var l slog.Level
		switch lv {
		case "debug":
			l = slog.LevelDebug
		case "info":
			l = slog.LevelInfo
		case "warn", "warning":
			l = slog.LevelWarn
		case "error", "fatal":
			l = slog.LevelError
		case "none":
			l = levelNone
		default:
			return 0, usageErr{fmt.Sprintf("--log_output_level: invalid level %q in %q (want debug, info, warn, error, fatal or none)", lv, part)}
		}
		if scope == "default" {
			level = l
		}
	}
	return level, nil
}

// callerScopes reports whether --log_caller names the agent's one scope ("default", or "all").
func callerScopes(spec string) bool {
	for scope := range strings.SplitSeq(spec, ",") {
		if s := strings.TrimSpace(scope); s == "default" || s == "all" {
			return true
		}
	}
	return false
}

// stacktraceNone refuses a --log_stacktrace_level that asks for stack traces (not supported yet):
// every scope's level must be none.
func stacktraceNone(spec string) error {
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		_, lv, ok := strings.Cut(part, ":")
		if !ok {
			lv = part
		}
		if lv != "none" {
			return usageErr{fmt.Sprintf("--log_stacktrace_level=%s: stack traces in logs are not supported yet (only none)", spec)}
		}
	}
	return nil
}
