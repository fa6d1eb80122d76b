// Package istiolog writes the agent's logs as Istio's agent writes them (its pkg/log, on zap), so
// that log pipelines built for istio-proxy parse Wingman's lines: a slog.Handler per scope with
// Istio's line format, JSON keys, level names, per-scope output levels, callers and stack traces.
//
// Established from Istio's source at 1.30.3 (pkg/log unchanged to master of 2026-08 but for
// klog.go) and the zap release it pins (go.uber.org/zap v1.28.0, Istio's go.mod at 1.30.3):
//
//   - Text (pkg/log/config.go defaultEncoderConfig with zapcore's console encoder):
//     time TAB level [TAB scope] [TAB caller] TAB message [TAB k=v k=v ...] [NEWLINE stack] NEWLINE.
//     The "default" scope writes no scope column (scope.go registerScope: nameToEmit is empty for
//     it). Fields follow the message, TAB then space-separated key=fmt.Sprint(value), unquoted
//     (scope.go emitWithTime).
//   - Time: UTC, microseconds, "2006-01-02T15:04:05.000000Z" (config.go formatDate).
//   - Levels: debug, info, warn, error, fatal (zapcore.LowercaseLevelEncoder).
//   - JSON (--log_as_json): {"level","time","scope","caller","msg", fields..., "stack"} in that
//     order (zapcore json_encoder.go EncodeEntry; keys from defaultEncoderConfig); entry strings
//     escaped as zap's safeAddString does, field values as encoding/json with HTML escaping off
//     (zap's reflected encoder), durations as strings (scope.go: DurationType, StringDurationEncoder).
//   - --log_output_level: "default:info,grpc:none" then the flag's value, split on commas, each
//     "scope:level" or a bare level for "default", applied in order; "all" sets every scope; a scope
//     the binary does not have is ignored; every scope starts at info (options.go
//     convertScopedLevel, config.go processLevels, scope.go registerScope).
//   - --log_stacktrace_level: the same syntax; a stack is written for a record of the default
//     scope at or above the scope's stack level, and for any record of another scope whose stack
//     level is error or finer (zapcore_handler.go dumpStack), as zap formats stacks.
//   - --log_caller: comma-separated scopes, or "all"; the caller is "dir/file.go:line"
//     (zapcore.ShortCallerEncoder).
//   - --log_target: every path gets every line; stdout, stderr, an absolute path, or a file URL
//     (zap.Open, sink.go).
//
// One deliberate difference: an error among a record's fields is written in JSON as its message
// (a string); Istio's reflected encoder writes most errors as {}.
package istiolog
