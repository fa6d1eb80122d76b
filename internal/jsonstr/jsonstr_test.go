package jsonstr

import (
	"encoding/json"
	"testing"
)

// Every ASCII byte's escape parses back to the byte (the escape is valid JSON and means c), and
// the control characters come out as encoding/json writes them.
func TestAppendEscapedASCII(t *testing.T) {
	for c := range byte(0x80) {
		lit := `"` + string(AppendEscapedASCII(nil, c)) + `"`
		var got string
		if err := json.Unmarshal([]byte(lit), &got); err != nil || got != string([]byte{c}) {
			t.Errorf("byte %#x: %s parses to %q, %v", c, lit, got, err)
		}
		if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			want, _ := json.Marshal(string([]byte{c}))
			if lit != string(want) {
				t.Errorf("byte %#x: %s, encoding/json writes %s", c, lit, want)
			}
		}
	}
	for r, last := range map[rune]byte{'\u2028': 8, '\u2029': 9} {
		want, _ := json.Marshal(string(r))
		if got := `"` + string(AppendLineSeparator(nil, last)) + `"`; got != string(want) {
			t.Errorf("U+%04X: %s, encoding/json writes %s", r, got, want)
		}
	}
}
