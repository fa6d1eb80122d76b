package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "file")
	for _, data := range []string{"first", "second, longer"} {
		if err := Write(path, []byte(data), 0o640, Options{DirMode: 0o700, Sync: true}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != data {
			t.Fatalf("read %q, %v; want %q", b, err, data)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	if st, _ := os.Stat(filepath.Dir(path)); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	// ExactDirMode sets an existing directory's mode, whatever it was.
	if err := Write(path, []byte("second, longer"), 0o640, Options{DirMode: 0o750, ExactDirMode: true}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Dir(path)); st.Mode().Perm() != 0o750 {
		t.Errorf("dir mode %v with ExactDirMode, want 0750", st.Mode().Perm())
	}
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	// A failed write leaves the old file and no temporary file.
	if err := os.Chmod(filepath.Dir(path), 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(filepath.Dir(path), 0o700)
	if os.Getuid() != 0 { // root writes anyway
		if err := Write(path, []byte("third"), 0o640, Options{}); err == nil {
			t.Fatal("write into a read-only directory succeeded")
		}
		if b, _ := os.ReadFile(path); string(b) != "second, longer" {
			t.Errorf("old content lost: %q", b)
		}
	}
}

// IsTemp names exactly the temporary files Write makes.
func TestIsTemp(t *testing.T) {
	dir := t.TempDir()
	f, err := os.CreateTemp(dir, ".module.wasm.tmp-*") // the pattern Write uses for module.wasm
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !IsTemp(filepath.Base(f.Name())) {
		t.Errorf("IsTemp(%q) = false", filepath.Base(f.Name()))
	}
	for _, name := range []string{"module.wasm", "a.tmp-1", ".hidden", "0123.json"} {
		if IsTemp(name) {
			t.Errorf("IsTemp(%q) = true", name)
		}
	}
}

func TestWriteFuncStreamsAndKeepsOldOnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFunc(path, 0o600, Options{}, func(w io.Writer) error {
		_, err := io.WriteString(w, "one")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := WriteFunc(path, 0o600, Options{}, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "one" {
		t.Fatalf("content %q, %v; want the first write kept", b, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
}
