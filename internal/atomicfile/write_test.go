package atomicfile

import (
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
