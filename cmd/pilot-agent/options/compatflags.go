package options

// KindFlag is a command-line flag of Istio's agent.
const KindFlag Kind = "flag"

// CompatFlags are Istio's logging flags (pkg/log options.go AttachFlags and klog.go at 1.30.3,
// unchanged on master of 2026-08), accepted by every sub-command, and what Wingman does with each
// (internal/istiolog writes Istio's format). cmd/pilot-agent's TestCompatFlagsComplete keeps it
// to the root flag set.
var CompatFlags = []CompatRow{
	{"--log_output_level", KindFlag, Same, "`scope:level` list after Istio's `default:info,grpc:none`, in order; `all` sets every scope; every scope starts at info; a scope Wingman does not have is ignored, as Istio ignores one its binary does not register. Scopes: Istio's for each part (`xdsproxy`, `sds`, `cache`, `ca`, `citadelclient`, `dns`, `wasm`, `healthcheck`, `probes`, `gcecred`, `default`); `grpc` and `klog` exist but nothing writes to them (no grpc-go, no klog in Wingman). A bad level exits 2 naming the flag with Istio's message (Istio exits 255)",
		[]string{"TestOutputLevels", "TestOutputLevelErrors", "TestLogFlags", "TestUsageErrors"}},
	{"--log_as_json", KindFlag, Different, "Istio's keys in zap's order (`level`, `time`, `scope`, `caller`, `msg`, fields, `stack`) and escapes; one difference: an error among the fields is written as its message, where Istio's reflected encoder writes most errors as `{}`",
		[]string{"TestJSONLine", "TestJSONFieldFailure", "TestJSONStringsAsEncodingJSON", "TestLogFlags"}},
	{"--log_caller", KindFlag, Same, "scopes, or `all`: a `dir/file.go:line` column after the scope (zap's short caller)", []string{"TestCaller", "TestLogFlags"}},
	{"--log_stacktrace_level", KindFlag, Same, "Istio's rule (zapcore_handler.go dumpStack): the default scope at or above its level; another scope on every record once its level is error or finer; zap's frame format, from the logging call outwards (Istio's also lists its pkg/log frames)", []string{"TestStackTraces", "TestUsageErrors"}},
	{"--log_target", KindFlag, Same, "repeatable (not split on commas); `stdout`, `stderr`, absolute paths and `file:` URLs; every line to every target; files appended to", []string{"TestTargets", "TestLogFlags", "TestUsageErrors"}},
	{"--log_rotate", KindFlag, IgnoredByIstio, "Istio removed log rotation in 1.24 (#52451) and its agent ignores unknown flags (cmd.go FParseErrWhitelist); Wingman accepts it, rotates nothing and logs one warning", []string{"TestLogRotateIgnored"}},
	{"--log_rotate_max_age", KindFlag, IgnoredByIstio, "as `--log_rotate`", []string{"TestLogRotateIgnored"}},
	{"--log_rotate_max_size", KindFlag, IgnoredByIstio, "as `--log_rotate`", []string{"TestLogRotateIgnored"}},
	{"--log_rotate_max_backups", KindFlag, IgnoredByIstio, "as `--log_rotate`", []string{"TestLogRotateIgnored"}},
	{"--vklog", KindFlag, Same, "other than 0, the `klog` scope logs at debug (Istio's Configure); nothing in Wingman logs through klog", []string{"TestKlogVerbose"}},
}
