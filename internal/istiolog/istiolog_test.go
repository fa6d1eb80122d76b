package istiolog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

// at is the instant of the example line: 2026-12-06T03:46:58.197258Z (nanoseconds are
// cut, not rounded, by Istio's formatDate, pkg/log/config.go at 1.30.3).
var at = time.Date(2026, 12, 6, 3, 46, 58, 197258999, time.UTC)

func newLogs(t *testing.T, o Options) (*Logs, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	l, err := New(o, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, &out
}

func record(level slog.Level, msg string, args ...any) slog.Record {
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:])
	r := slog.NewRecord(at, level, msg, pcs[0])
	r.Add(args...)
	return r
}

func handle(t *testing.T, h slog.Handler, r slog.Record) {
	t.Helper()
	if !h.Enabled(context.Background(), r.Level) {
		t.Fatalf("level %v not enabled", r.Level)
	}
	if err := h.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// TestTextLine: Istio's console line (pkg/log/config.go defaultEncoderConfig and formatDate,
// zapcore console_encoder.go EncodeEntry, pkg/log/scope.go emitWithTime at 1.30.3): time, level,
// the scope unless it is "default", the message, then TAB and the fields as k=fmt.Sprint(v)
// separated by spaces, unquoted.
func TestTextLine(t *testing.T) {
	l, out := newLogs(t, Options{OutputLevels: "default:debug,dns:debug"})
	handle(t, l.Handler(ScopeXDSProxy), record(slog.LevelInfo, "connected to upstream XDS server", "id", 1, "addr", "istiod.istio-system.svc:15012"))
	handle(t, l.Handler(DefaultScope), record(slog.LevelWarn, "Envoy proxy is NOT ready: config not received"))
	handle(t, l.Handler(DefaultScope), record(slog.LevelError, "x", "err", errors.New("boom: a b"), "d", 1500*time.Millisecond, "ok", true, "ips", []string{"10.0.0.1", "fd00::1"}))
	handle(t, l.Handler(ScopeDNS).WithAttrs([]slog.Attr{slog.String("pre", "p")}), record(slog.LevelDebug, "m", "k", "v w"))
	want := "2026-12-06T03:46:58.197258Z\tinfo\txdsproxy\tconnected to upstream XDS server\tid=1 addr=istiod.istio-system.svc:15012\n" +
		"2026-12-06T03:46:58.197258Z\twarn\tEnvoy proxy is NOT ready: config not received\n" +
		"2026-12-06T03:46:58.197258Z\terror\tx\terr=boom: a b d=1.5s ok=true ips=[10.0.0.1 fd00::1]\n" +
		"2026-12-06T03:46:58.197258Z\tdebug\tdns\tm\tpre=p k=v w\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
}

// TestJSONLine: --log_as_json keys and their order (zapcore json_encoder.go EncodeEntry with
// pkg/log/config.go defaultEncoderConfig: level, time, scope, caller, msg, fields, stack); no scope
// key for "default"; a duration as a string (scope.go: DurationType, StringDurationEncoder).
func TestJSONLine(t *testing.T) {
	l, out := newLogs(t, Options{JSON: true})
	handle(t, l.Handler(ScopeSDS), record(slog.LevelInfo, `sds: "push"`+"\n", "resource", "default", "n", 2, "d", time.Second, "f", 0.5, "u", uint64(7)))
	handle(t, l.Handler(DefaultScope), record(slog.LevelWarn, "plain"))
	want := `{"level":"info","time":"2026-12-06T03:46:58.197258Z","scope":"sds","msg":"sds: \"push\"\n","resource":"default","n":2,"d":"1s","f":0.5,"u":7}` + "\n" +
		`{"level":"warn","time":"2026-12-06T03:46:58.197258Z","msg":"plain"}` + "\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not JSON: %s: %v", line, err)
		}
	}
}

// TestJSONFieldFailure: a value encoding/json refuses is left out and "<key>Error" says why
// (zapcore/field.go AddTo with the reflected encoder).
func TestJSONFieldFailure(t *testing.T) {
	l, out := newLogs(t, Options{JSON: true})
	handle(t, l.Handler(ScopeCA), record(slog.LevelInfo, "m", "a", 1, "f", math.NaN(), "c", make(chan int)))
	want := `{"level":"info","time":"2026-12-06T03:46:58.197258Z","scope":"ca","msg":"m","a":1,"fError":"json: unsupported value: NaN","cError":"json: unsupported type: chan int"}` + "\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestJSONStringsAsEncodingJSON: field strings are written as encoding/json with HTML escaping
// off writes them (zap's reflected encoder, zapcore/reflected_encoder.go).
func TestJSONStringsAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "<a&b>", "q\"b\\", "\x00\x01\b\f\n\r\t\x1f\x7f", "é\u2028\u2029😀", "bad\xff\xfe utf8", "\xe2\x80"} {
		var sb strings.Builder
		enc := json.NewEncoder(&sb)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got, want := string(appendJSONString(nil, s)), strings.TrimSuffix(sb.String(), "\n"); got != want {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

// TestZapEscapes: the entry's strings (message, scope, stack) as zap's safeAddString escapes them
// (zapcore/json_encoder.go, zap v1.28.0): only \\ \" \n \r \t short, other control bytes \u00XX,
// invalid bytes \ufffd, everything else as is (no \b, no U+2028 escape, no HTML escape).
func TestZapEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"a\"b\\c":        `a\"b\\c`,
		"\n\r\t\b\f\x01": `\n\r\t\u0008\u000c\u0001`,
		"<&>\u2028é":     "<&>\u2028é",
		"x\xffy":         `x\ufffdy`,
	} {
		if got := string(appendZapString(nil, in)); got != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
}

// TestTime: formatDate writes UTC with microseconds cut (pkg/log/config.go at 1.30.3).
func TestTime(t *testing.T) {
	loc := time.FixedZone("x", -7*3600)
	for in, want := range map[time.Time]string{
		at:                                       "2026-12-06T03:46:58.197258Z",
		time.Date(2026, 1, 2, 3, 4, 5, 999, loc): "2026-01-02T10:04:05.000000Z",
		time.Date(999, 9, 9, 9, 9, 9, 1000, time.UTC): "0999-09-09T09:09:09.000001Z",
	} {
		if got := string(appendTime(nil, in)); got != want {
			t.Errorf("%v: %s, want %s", in, got, want)
		}
	}
}
