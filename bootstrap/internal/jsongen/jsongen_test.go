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
		writeMetadata(t, dir, "type Metadata struct{}\n")
		if _, err := Build(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", src, err, want)
		}
	}
}

func writeMetadata(t *testing.T, dir, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, MetadataInput), []byte("package bootstrap\n"+src), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMetadataTable: the table is sorted by key in byte order, skips untagged and "-" fields, and
// a key tagged twice fails the generation.
func TestMetadataTable(t *testing.T) {
	dir := t.TempDir()
	for _, name := range Inputs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("package bootstrap\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeMetadata(t, dir, "type Metadata struct {\n\tB string `json:\"b_KEY,omitempty\"`\n\tA string `json:\"B_KEY\"`\n\tRaw map[string]any `json:\"-\"`\n\tX int\n}\n")
	out, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	upper, lower := strings.Index(string(out), `{"B_KEY", func(m *Metadata) any { return &m.A }}`), strings.Index(string(out), `{"b_KEY", func(m *Metadata) any { return &m.B }}`)
	if upper < 0 || lower < upper || strings.Contains(string(out), "m.Raw") || strings.Contains(string(out), "m.X") {
		t.Errorf("table:\n%s", out)
	}
	writeMetadata(t, dir, "type Metadata struct {\n\tA string `json:\"K\"`\n\tB string `json:\"K,omitempty\"`\n}\n")
	if _, err := Build(dir); err == nil || !strings.Contains(err.Error(), "key K tagged twice") {
		t.Errorf("a key tagged twice: %v", err)
	}
}
