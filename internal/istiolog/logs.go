package istiolog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Scope names: Istio's, for the part of its agent that writes the same lines (registered with
// pkg/log.RegisterScope at 1.30.3, in the file named).
const (
	DefaultScope = "default" // pkg/log/options.go: unscoped lines; no scope column
	AllScopes    = "all"     // pkg/log/options.go OverrideScopeName: sets every scope

	ScopeXDSProxy      = "xdsproxy"      // pkg/istio-agent/xds_proxy.go
	ScopeDNS           = "dns"           // pkg/dns/client/dns.go
	ScopeCache         = "cache"         // security/pkg/nodeagent/cache/secretcache.go
	ScopeSDS           = "sds"           // security/pkg/nodeagent/sds/sdsservice.go
	ScopeCitadelClient = "citadelclient" // security/pkg/nodeagent/caclient/providers/citadel/client.go
	ScopeCA            = "ca"            // pkg/security/retry.go
	ScopeGCECred       = "gcecred"       // security/pkg/credentialfetcher/plugin/gce.go
	ScopeWasm          = "wasm"          // pkg/wasm/cache.go
	ScopeHealthCheck   = "healthcheck"   // pkg/istio-agent/health/health_probers.go
	ScopeProbes        = "probes"        // pilot/cmd/pilot-agent/status/server.go
	ScopeGRPC          = "grpc"          // pkg/log/config.go GrpcScopeName
	ScopeKlog          = "klog"          // pkg/log/klog.go

	// ScopeLastState is Wingman's own (WINGMAN_LAST_STATE has no counterpart in Istio's agent).
	ScopeLastState = "laststate"
)

// DefaultOutputLevels come before --log_output_level (pkg/log/options.go DefaultOptions).
const DefaultOutputLevels = "default:info,grpc:none"

// DefaultStackTraceLevels is --log_stacktrace_level's default (pkg/log/options.go).
const DefaultStackTraceLevels = "default:none"

// Options are Istio's logging flags.
type Options struct {
	OutputLevels     string   // --log_output_level, applied after DefaultOutputLevels
	StackTraceLevels string   // --log_stacktrace_level ("" is DefaultStackTraceLevels)
	Callers          string   // --log_caller
	Targets          []string // --log_target (stdout when empty)
	JSON             bool     // --log_as_json
	KlogVerbose      bool     // --vklog other than 0: the klog scope logs at debug (pkg/log/config.go Configure)
}

// Logs is the configured logging: one slog.Logger per scope, all writing to the targets.
type Logs struct {
	out        *output
	levels     []scopedLevel
	stacks     []scopedLevel
	callers    map[string]bool
	allCallers bool
	klogDebug  bool
}

// New checks the options as Istio's log.Configure does and opens the targets. stdout and stderr
// stand for the process's own (the "stdout" and "stderr" targets; write errors go to stderr).
func New(o Options, stdout, stderr io.Writer) (*Logs, error) {
	levels := DefaultOutputLevels
	if o.OutputLevels != "" {
		levels += "," + o.OutputLevels
	}
	ol, err := parseLevels(levels)
	if err != nil {
		return nil, fmt.Errorf("--log_output_level: %w", err)
	}
	if o.StackTraceLevels == "" {
		o.StackTraceLevels = DefaultStackTraceLevels
	}
	sl, err := parseLevels(o.StackTraceLevels)
	if err != nil {
		return nil, fmt.Errorf("--log_stacktrace_level: %w", err)
	}
	l := &Logs{levels: ol, stacks: sl, callers: map[string]bool{}, klogDebug: o.KlogVerbose}
	for s := range strings.SplitSeq(o.Callers, ",") {
		if s == AllScopes {
			l.allCallers = true
		} else if s != "" {
			l.callers[s] = true
		}
	}
	out, err := openTargets(o.Targets, stdout, stderr)
	if err != nil {
		return nil, err
	}
	out.json = o.JSON
	l.out = out
	return l, nil
}

// Level is the output level of a scope.
func (l *Logs) Level(scope string) Level {
	if scope == ScopeKlog && l.klogDebug {
		return Debug
	}
	return levelOf(l.levels, scope, Info)
}

// Logger returns the logger of a scope; DefaultScope writes no scope column.
func (l *Logs) Logger(scope string) *slog.Logger {
	return slog.New(l.Handler(scope))
}

// Handler returns the handler of a scope.
func (l *Logs) Handler(scope string) slog.Handler {
	h := &handler{out: l.out, min: l.Level(scope).min(), stack: levelOf(l.stacks, scope, None),
		caller: l.allCallers || l.callers[scope], isDefault: scope == DefaultScope}
	if !h.isDefault {
		h.scope = scope
	}
	return h
}

// Close closes the files among the targets.
func (l *Logs) Close() error { return l.out.close() }

// output is where every scope writes: one lock, one Write per line and target (zap's locked
// multi-writer).
type output struct {
	mu      sync.Mutex
	ws      []io.Writer
	closers []io.Closer
	errw    io.Writer
	json    bool
}

func (o *output) write(b []byte) {
	o.mu.Lock()
	var err error
	for _, w := range o.ws {
		if _, e := w.Write(b); e != nil {
			err = errors.Join(err, e)
		}
	}
	o.mu.Unlock()
	if err != nil && o.errw != nil {
		fmt.Fprintf(o.errw, "%v log write error: %v\n", time.Now(), err) // zap's errorSink line (pkg/log/scope.go)
	}
}

func (o *output) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var err error
	for _, c := range o.closers {
		err = errors.Join(err, c.Close())
	}
	o.closers = nil
	return err
}

// openTargets opens --log_target's paths as zap.Open does: "stdout", "stderr", an absolute path,
// or a URL whose scheme is file (or none); files are opened to append, created 0666 (umask applies).
func openTargets(paths []string, stdout, stderr io.Writer) (*output, error) {
	if len(paths) == 0 {
		paths = []string{"stdout"}
	}
	o := &output{errw: stderr}
	var errs error
	for _, p := range paths {
		w, c, err := openTarget(p, stdout, stderr)
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("--log_target %q: %w", p, err))
			continue
		}
		o.ws = append(o.ws, w)
		if c != nil {
			o.closers = append(o.closers, c)
		}
	}
	if errs != nil {
		o.close()
		return nil, errs
	}
	return o, nil
}

func openTarget(raw string, stdout, stderr io.Writer) (io.Writer, io.Closer, error) {
	path := raw
	if !filepath.IsAbs(raw) {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("can't parse %q as a URL: %v", raw, err)
		}
		switch {
		case u.Scheme != "" && u.Scheme != "file":
			return nil, nil, fmt.Errorf("no sink found for scheme %q", u.Scheme)
		case u.User != nil, u.Fragment != "", u.RawQuery != "", u.Port() != "":
			return nil, nil, fmt.Errorf("user, fragment, query and port are not allowed in file URLs: got %v", u)
		case u.Hostname() != "" && u.Hostname() != "localhost":
			return nil, nil, fmt.Errorf("file URLs must leave host empty or use localhost: got %v", u)
		}
		path = u.Path
	}
	switch path {
	case "stdout":
		return stdout, nil, nil
	case "stderr":
		return stderr, nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return nil, nil, err
	}
	return f, f, nil
}
