package istiolog

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputLevels: pkg/log at 1.30.3: "default:info,grpc:none" come first (options.go
// DefaultOptions), then --log_output_level, applied in order (config.go processLevels); a bare
// level is the default scope's (options.go convertScopedLevel); "all" sets every scope; every
// scope starts at info (scope.go registerScope), so default's level is not inherited.
func TestOutputLevels(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want map[string]Level
	}{
		{"", map[string]Level{DefaultScope: Info, ScopeGRPC: None, ScopeXDSProxy: Info}},
		{"debug", map[string]Level{DefaultScope: Debug, ScopeXDSProxy: Info}},
		{"default:warn,xdsproxy:debug", map[string]Level{DefaultScope: Warn, ScopeXDSProxy: Debug, ScopeDNS: Info}},
		{"all:debug", map[string]Level{DefaultScope: Debug, ScopeGRPC: Debug, ScopeSDS: Debug}},
		{"all:error,dns:debug", map[string]Level{DefaultScope: Error, ScopeDNS: Debug, ScopeCache: Error}},
		{"dns:debug,all:error", map[string]Level{ScopeDNS: Error}},
		{"grpc:info", map[string]Level{ScopeGRPC: Info}},
		{"nosuchscope:debug", map[string]Level{DefaultScope: Info, ScopeXDSProxy: Info}}, // ignored, as Istio
		{"default:none", map[string]Level{DefaultScope: None}},
		{"default:fatal", map[string]Level{DefaultScope: Fatal}},
	} {
		l, _ := newLogs(t, Options{OutputLevels: tc.spec})
		for scope, want := range tc.want {
			if got := l.Level(scope); got != want {
				t.Errorf("%q: scope %s at %v, want %v", tc.spec, scope, got, want)
			}
		}
	}
}

// TestOutputLevelErrors: Istio's messages (options.go convertScopedLevel): no trimming, no
// "warning", an empty entry is an invalid level.
func TestOutputLevelErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"default:warning":  "--log_output_level: invalid output level 'warning'",
		"DEBUG":            "--log_output_level: invalid output level 'DEBUG'",
		"a:b:c":            "--log_output_level: invalid output level format 'a:b:c'",
		"default:debug,":   "--log_output_level: invalid output level ''",
		"default: debug":   "--log_output_level: invalid output level ' debug'",
		"xdsproxy:verbose": "--log_output_level: invalid output level 'verbose'",
	} {
		_, err := New(Options{OutputLevels: spec, StackTraceLevels: DefaultStackTraceLevels}, os.Stdout, os.Stderr)
		if err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", spec, err, want)
		}
	}
	if _, err := New(Options{StackTraceLevels: "default:loud"}, os.Stdout, os.Stderr); err == nil || err.Error() != "--log_stacktrace_level: invalid output level 'loud'" {
		t.Errorf("stack levels: %v", err)
	}
}

// TestEnabled: a scope at level L writes L and the levels before it (scope.go: GetOutputLevel()
// >= level).
func TestEnabled(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		level   string
		enabled []slog.Level
		off     []slog.Level
	}{
		{"debug", []slog.Level{slog.LevelDebug - 4, slog.LevelDebug, slog.LevelError}, nil},
		{"info", []slog.Level{slog.LevelInfo, slog.LevelWarn}, []slog.Level{slog.LevelDebug}},
		{"warn", []slog.Level{slog.LevelWarn, slog.LevelError}, []slog.Level{slog.LevelInfo}},
		{"error", []slog.Level{slog.LevelError, LevelFatal}, []slog.Level{slog.LevelWarn}},
		{"fatal", []slog.Level{LevelFatal}, []slog.Level{slog.LevelError}},
		{"none", nil, []slog.Level{LevelFatal, slog.LevelError}},
	} {
		l, _ := newLogs(t, Options{OutputLevels: "dns:" + tc.level})
		h := l.Handler(ScopeDNS)
		for _, lv := range tc.enabled {
			if !h.Enabled(ctx, lv) {
				t.Errorf("dns:%s: %v disabled", tc.level, lv)
			}
		}
		for _, lv := range tc.off {
			if h.Enabled(ctx, lv) {
				t.Errorf("dns:%s: %v enabled", tc.level, lv)
			}
		}
	}
}

// TestCaller: --log_caller names scopes, or "all" (config.go updateScopes); the caller column comes
// after the scope, as "dir/file.go:line" (zapcore.ShortCallerEncoder).
func TestCaller(t *testing.T) {
	l, out := newLogs(t, Options{Callers: "dns,,sds"})
	r := record(slog.LevelInfo, "m")
	handle(t, l.Handler(ScopeDNS), r)
	handle(t, l.Handler(ScopeCache), r)
	lines := strings.Split(out.String(), "\n")
	if f := strings.Split(lines[0], "\t"); len(f) != 5 || !strings.HasPrefix(f[3], "istiolog/levels_test.go:") {
		t.Errorf("dns: %q", lines[0])
	}
	if f := strings.Split(lines[1], "\t"); len(f) != 4 {
		t.Errorf("cache: %q", lines[1])
	}
	l, out = newLogs(t, Options{Callers: "all", JSON: true})
	handle(t, l.Handler(DefaultScope), r)
	if !strings.Contains(out.String(), `","caller":"istiolog/levels_test.go:`) {
		t.Errorf("all, JSON: %s", out)
	}
}

// TestStackTraces: zapcore_handler.go dumpStack at 1.30.3: the default scope dumps a stack for
// records at or above its stack level; any other scope, once its stack level is error or finer,
// for every record. The stack follows the line after a newline, in zap's frame format.
func TestStackTraces(t *testing.T) {
	l, out := newLogs(t, Options{StackTraceLevels: "default:error,xdsproxy:error,dns:fatal"})
	logAt := func(scope string, lv slog.Level) string {
		out.Reset()
		handle(t, l.Handler(scope), record(lv, "m"))
		return out.String()
	}
	for _, tc := range []struct {
		scope string
		lv    slog.Level
		stack bool
	}{
		{DefaultScope, slog.LevelError, true},
		{DefaultScope, slog.LevelWarn, false},
		{ScopeXDSProxy, slog.LevelInfo, true}, // Istio's rule for non-default scopes
		{ScopeDNS, slog.LevelError, false},
		{ScopeDNS, LevelFatal, true},
		{ScopeSDS, slog.LevelError, false}, // none, the start
	} {
		got := logAt(tc.scope, tc.lv)
		has := strings.Contains(got, "\tm\ngithub.com/wingman-mesh/wingman/internal/istiolog.TestStackTraces")
		if has != tc.stack {
			t.Errorf("%s at %v: stack %v, want %v:\n%s", tc.scope, tc.lv, has, tc.stack, got)
		}
		if has && !strings.Contains(got, "\n\t") {
			t.Errorf("frame format: %s", got)
		}
	}
}

// TestTargets: every line goes to every --log_target (zap.Open: stdout, stderr, absolute paths,
// file URLs; files appended to); an unknown scheme or an unopenable file fails naming the path.
func TestTargets(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	if err := os.WriteFile(a, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var so, se strings.Builder
	l, err := New(Options{Targets: []string{a, "file://" + b, "stderr"}}, &so, &se)
	if err != nil {
		t.Fatal(err)
	}
	l.Logger(ScopeDNS).Info("hello")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b} {
		data, _ := os.ReadFile(p)
		if !strings.HasSuffix(string(data), "\tinfo\tdns\thello\n") {
			t.Errorf("%s: %q", p, data)
		}
	}
	if a, _ := os.ReadFile(a); !strings.HasPrefix(string(a), "old\n") {
		t.Errorf("not appended: %q", a)
	}
	if so.Len() != 0 || !strings.HasSuffix(se.String(), "\thello\n") {
		t.Errorf("stdout %q stderr %q", so.String(), se.String())
	}
	for _, bad := range []string{"http://x/y", filepath.Join(dir, "no", "such", "dir")} {
		if _, err := New(Options{Targets: []string{bad}}, &so, &se); err == nil || !strings.Contains(err.Error(), "--log_target \""+bad+"\"") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestKlogVerbose: --vklog other than 0 turns the klog scope to debug (pkg/log/config.go Configure).
func TestKlogVerbose(t *testing.T) {
	l, _ := newLogs(t, Options{KlogVerbose: true, OutputLevels: "all:error"})
	if l.Level(ScopeKlog) != Debug || l.Level(DefaultScope) != Error {
		t.Errorf("klog %v default %v", l.Level(ScopeKlog), l.Level(DefaultScope))
	}
}
