package jsongen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusesUnknownKinds: a field whose type has no rule, or a tag option the writer does not
// implement, fails the generation naming the field instead of writing JSON encoding/json would not.
func TestRefusesUnknownKinds(t *testing.T) {
	for src, want := range map[string]string{
		"type A struct {\n\tN int `json:\"n\"`\n}\n":            "A.N: field type int",
		"type A struct {\n\tS string `json:\"s,string\"`\n}\n":  `A.S: json option "string"`,
		"type A struct {\n\tS string\n}\n":                      "A: every field needs",
		"type A struct {\n\tB []B `json:\"b\"`\n}\n":            "A.B: field type []B",
		"type A struct {\n\tM map[string]int `json:\"m\"`\n}\n": "A.M: field type map[string]int",
		"type A struct {\n\tS string `json:\"-\"`\n}\n":         "A.S: no json name",
	} {
		dir := t.TempDir()
		for _, name := range Inputs {
			body := "package bootstrap\n"
			if name == Inputs[0] {
				body += src
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Build(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", src, err, want)
		}
	}
}
