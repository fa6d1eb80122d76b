package istiolog

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzJSONString: a field string is written byte for byte as encoding/json (HTML escaping off)
// writes it, and the entry's strings (zap's escapes) always decode back to the input with invalid
// UTF-8 replaced.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00\u2028<>&", "bad\xff", "é😀\t\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var sb strings.Builder
		enc := json.NewEncoder(&sb)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got, want := string(appendJSONString(nil, s)), strings.TrimSuffix(sb.String(), "\n"); got != want {
			t.Fatalf("%q: %s, want %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(`"`+string(appendZapString(nil, s))+`"`), &back); err != nil {
			t.Fatalf("%q: zap escape not JSON: %v", s, err)
		}
		if want := perByteValid(s); back != want {
			t.Fatalf("%q: decoded %q, want %q", s, back, want)
		}
	})
}

// perByteValid replaces each invalid UTF-8 byte of s with U+FFFD, as zap does.
func perByteValid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// FuzzParseLevels: any --log_output_level either fails with Istio's message or gives each entry
// a known level.
func FuzzParseLevels(f *testing.F) {
	for _, s := range []string{"", "debug", "default:info,grpc:none", "a:b:c", "all:warn,dns:debug,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := parseLevels(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid output level") {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if len(list) != strings.Count(s, ",")+1 {
			t.Fatalf("%q: %d entries", s, len(list))
		}
		for _, e := range list {
			if e.level > Debug || strings.ContainsAny(e.scope, ":,") {
				t.Fatalf("%q: %+v", s, e)
			}
		}
	})
}
