package bootstrap

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"
)

// templateFuncs are the functions a custom bootstrap template may call besides text/template's
// builtins (and, or, not, eq, index, js, len, printf, ...). Istio's agent registers its own toJSON
// and the "generic" function map of the sprig library; this is our own implementation of the part
// of that map bootstrap templates use, under sprig's names and with sprig's argument order
// (documented at masterminds.github.io/sprig: the value a function works on comes last, so it can
// be piped). Anything else a template calls fails at parse time naming the function.
var templateFuncs = template.FuncMap{
	// Istio's own: nil renders {}, a value that does not marshal renders {}.
	"toJSON": istioToJSON,

	// JSON (sprig swallows the error: toJson renders "" for a value that does not marshal).
	"toJson":       func(v any) string { b, _ := json.Marshal(v); return string(b) },
	"toPrettyJson": func(v any) string { b, _ := json.MarshalIndent(v, "", "  "); return string(b) },
	"mustToJson":   func(v any) (string, error) { b, err := json.Marshal(v); return string(b), err },

	// Defaults and emptiness.
	"default":  tmplDefault,
	"empty":    isEmpty,
	"coalesce": coalesce,
	"ternary": func(whenTrue, whenFalse any, cond bool) any {
		if cond {
			return whenTrue
		}
		return whenFalse
	},

	// Strings.
	"toString":   func(v any) string { return fmt.Sprint(v) },
	"quote":      func(vs ...any) string { return quoteAll(vs, strconv.Quote) },
	"squote":     func(vs ...any) string { return quoteAll(vs, func(s string) string { return "'" + s + "'" }) },
	"trim":       strings.TrimSpace,
	"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
	"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
	"upper":      strings.ToUpper,
	"lower":      strings.ToLower,
	"replace":    func(old, repl, s string) string { return strings.ReplaceAll(s, old, repl) },
	"contains":   func(substr, s string) bool { return strings.Contains(s, substr) },
	"hasPrefix":  func(prefix, s string) bool { return strings.HasPrefix(s, prefix) },
	"hasSuffix":  func(suffix, s string) bool { return strings.HasSuffix(s, suffix) },
	"splitList":  func(sep, s string) []string { return strings.Split(s, sep) },
	"join":       join,
	"indent":     indent,
	"nindent":    func(n int, s string) string { return "\n" + indent(n, s) },
	"b64enc":     func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	"b64dec": func(s string) string {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return err.Error() // sprig renders the decoding error as the value
		}
		return string(b)
	},

	// Numbers (sprig's atoi and int render 0 for what does not parse).
	"atoi": func(s string) int { n, _ := strconv.Atoi(strings.TrimSpace(s)); return n },
	"int":  toInt,

	// Lists and dictionaries.
	"list": func(vs ...any) []any { return vs },
	"dict": func(kv ...any) map[string]any {
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			var v any
			if i+1 < len(kv) {
				v = kv[i+1]
			}
			m[fmt.Sprint(kv[i])] = v
		}
		return m
	},
	"hasKey": func(m map[string]any, key string) bool { _, ok := m[key]; return ok },
	"get": func(m map[string]any, key string) any {
		if v, ok := m[key]; ok {
			return v
		}
		return ""
	},
}

func istioToJSON(v any) string {
	if v == nil {
		return "{}"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// isEmpty is sprig's notion of empty: nil, a zero number, false, and an empty string, slice, map
// or array; a struct is never empty.
func isEmpty(v any) bool {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return true
	}
	switch rv.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return rv.Len() == 0
	case reflect.Bool:
		return !rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return rv.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return rv.Float() == 0
	case reflect.Complex64, reflect.Complex128:
		return rv.Complex() == 0
	case reflect.Pointer, reflect.Interface:
		return rv.IsNil()
	case reflect.Struct:
		return false
	default:
		return rv.IsZero()
	}
}

// tmplDefault is `default DEFAULT [VALUE]`: DEFAULT when VALUE is missing or empty.
func tmplDefault(def any, given ...any) any {
	if len(given) == 0 || isEmpty(given[0]) {
		return def
	}
	return given[0]
}

func coalesce(vs ...any) any {
	for _, v := range vs {
		if !isEmpty(v) {
			return v
		}
	}
	return nil
}

func quoteAll(vs []any, q func(string) string) string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if v != nil {
			out = append(out, q(fmt.Sprint(v)))
		}
	}
	return strings.Join(out, " ")
}

// join is `join SEP LIST`: LIST may be any slice or array (elements printed with fmt), or a
// single string.
func join(sep string, list any) string {
	rv := reflect.ValueOf(list)
	if !rv.IsValid() {
		return ""
	}
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return fmt.Sprint(list)
	}
	parts := make([]string, rv.Len())
	for i := range parts {
		parts[i] = fmt.Sprint(rv.Index(i).Interface())
	}
	return strings.Join(parts, sep)
}

// maxIndent bounds indent's width: a template cannot make the agent allocate without bound.
const maxIndent = 1 << 12

func indent(n int, s string) string {
	n = min(max(n, 0), maxIndent)
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

func toInt(v any) int {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return int(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return int(rv.Float())
	case reflect.Bool:
		if rv.Bool() {
			return 1
		}
		return 0
	case reflect.String:
		n, _ := strconv.Atoi(strings.TrimSpace(rv.String()))
		return n
	}
	return 0
}
