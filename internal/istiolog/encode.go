package istiolog

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wingman-mesh/wingman/internal/jsonstr"
)

// appendTime appends Istio's timestamp: UTC, microseconds, "Z" (pkg/log/config.go formatDate).
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, second := t.Clock()
	micros := t.Nanosecond() / 1000
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, second, 2)
	b = append(b, '.')
	b = appendDigits(b, micros, 6)
	return append(b, 'Z')
}

// appendDigits appends the last n decimal digits of v (formatDate's digit arithmetic).
func appendDigits(b []byte, v, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		d := v
		for range i {
			d /= 10
		}
		b = append(b, byte(d%10)+'0')
	}
	return b
}

func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) }

// appendTrimmedPath is zapcore.EntryCaller.TrimmedPath: everything after the penultimate '/'.
func appendTrimmedPath(b []byte, file string, line int) []byte {
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		if j := strings.LastIndexByte(file[:i], '/'); j >= 0 {
			file = file[j+1:]
		}
	}
	b = append(b, file...)
	b = append(b, ':')
	return appendInt(b, int64(line))
}

// appendTextValue appends a field's value as Istio's text form does: fmt.Sprint(value)
// (pkg/log/scope.go emitWithTime), without fmt for the common kinds.
func appendTextValue(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return append(b, v.String()...)
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		return append(b, v.Duration().String()...)
	case slog.KindFloat64:
		return fmt.Append(b, v.Float64())
	case slog.KindTime:
		return append(b, v.Time().String()...)
	}
	a := v.Any()
	if err, ok := a.(error); ok && err != nil {
		return append(b, err.Error()...)
	}
	return fmt.Append(b, a)
}

// appendJSONValue appends a field's value as zap's JSON encoder writes Istio's fields: a
// duration as its string, anything else as encoding/json (HTML escaping off) would, but an error
// as its message. It fails as encoding/json does (NaN, a value json cannot marshal).
func appendJSONValue(b []byte, v slog.Value) ([]byte, error) {
	switch v.Kind() {
	case slog.KindString:
		return appendJSONString(b, v.String()), nil
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10), nil
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10), nil
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool()), nil
	case slog.KindDuration:
		b = append(b, '"')
		b = append(b, v.Duration().String()...)
		return append(b, '"'), nil
	case slog.KindFloat64:
		f := v.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return b, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
		}
		return appendJSONFloat(b, f), nil
	case slog.KindTime:
		b = append(b, '"')
		b = v.Time().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"'), nil
	}
	a := v.Any()
	if a == nil {
		return append(b, "null"...), nil
	}
	if err, ok := a.(error); ok {
		return appendJSONString(b, err.Error()), nil
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		return b, err
	}
	return append(b, strings.TrimSuffix(sb.String(), "\n")...), nil
}

// appendJSONFloat is encoding/json's float64 format.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString appends s quoted as encoding/json with SetEscapeHTML(false) writes it.
func appendJSONString(b []byte, s string) []byte { return jsonstr.AppendString(b, s, false) }

const hexDigits = "0123456789abcdef"

// appendZapString appends s escaped as zap's JSON encoder escapes the entry's strings
// (zapcore/json_encoder.go safeAppendStringLike): \\ \" \n \r \t, \u00XX for other control
// bytes, \ufffd for each invalid UTF-8 byte; nothing else (no \b, \f, U+2028).
func appendZapString(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[last:i]...)
			b = append(b, `\ufffd`...)
			i++
			last = i
			continue
		}
		if c >= 0x20 && c != '\\' && c != '"' {
			i++
			continue
		}
		b = append(b, s[last:i]...)
		switch c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		last = i
	}
	return append(b, s[last:]...)
}
