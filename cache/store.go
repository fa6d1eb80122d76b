package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/wingman-mesh/wingman/internal/atomicfile"
)

// store is the on-disk layout under dir/wasm (0755): modules named by the sha256 of their bytes
// (<sha>.wasm, 0644) and one index entry per download URL (index/<sha256(url)>.json). Every
// name is a hash, so no URL, tag or module name can place a file outside the directory. Files
// are written to a temporary name and renamed into place: a reader sees a whole file or none.
type store struct {
	dir, index string
}

func openStore(base string) (*store, error) {
	s := &store{dir: filepath.Join(base, "wasm")}
	s.index = filepath.Join(s.dir, "index")
	return s, nil // the directories are made on the first write: nothing is needed until then
}

func (s *store) modulePath(sha string) string { return filepath.Join(s.dir, sha+".wasm") }

func (s *store) entryPath(url string) string {
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(s.index, hex.EncodeToString(sum[:])+".json")
}

// writeModule stores b as <sha>.wasm unless it is there already.
func (s *store) writeModule(sha string, b []byte) (string, error) {
	p := s.modulePath(sha)
	if fi, err := os.Stat(p); err == nil && fi.Size() == int64(len(b)) {
		return p, nil
	}
	return p, write(p, b)
}

func (s *store) writeEntry(e *urlEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return write(s.entryPath(e.URL), b)
}

func (s *store) removeModule(sha string) error {
	err := os.Remove(s.modulePath(sha))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (s *store) removeEntry(url string) { _ = os.Remove(s.entryPath(url)) }

// write replaces p with b, synced, 0644 in a 0755 directory whatever the umask: Envoy may run as
// another user and reads the tree.
func write(p string, b []byte) error {
	if err := atomicfile.Write(p, b, 0o644, atomicfile.Options{DirMode: 0o755, ExactDirMode: true, Sync: true}); err != nil {
		return fmt.Errorf("wasm cache: %w", err)
	}
	return nil
}

// load rebuilds the index after a restart: temporary files are removed, every module is read
// back and kept only if its bytes still hash to its name, and index entries are kept only if
// their module is there. Modules no entry points to are removed.
func (s *store) load(log *slog.Logger) ([]*urlEntry, map[string]int64, error) {
	sizes := map[string]int64{}
	if _, err := os.Stat(s.index); errors.Is(err, os.ErrNotExist) {
		return nil, sizes, nil // a fresh cache
	}
	for _, dir := range []string{s.dir, s.index} {
		des, err := os.ReadDir(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("wasm cache: %w", err)
		}
		for _, de := range des {
			if atomicfile.IsTemp(de.Name()) {
				_ = os.Remove(filepath.Join(dir, de.Name()))
			}
		}
	}
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("wasm cache: %w", err)
	}
	for _, de := range des {
		sha, ok := strings.CutSuffix(de.Name(), ".wasm")
		if !ok || !de.Type().IsRegular() {
			continue
		}
		size, good := verifyFile(filepath.Join(s.dir, de.Name()), sha)
		if !good {
			log.Warn("removing corrupt Wasm module from the cache", "file", de.Name())
			_ = os.Remove(filepath.Join(s.dir, de.Name()))
			continue
		}
		sizes[sha] = size
	}
	ides, err := os.ReadDir(s.index)
	if err != nil {
		return nil, nil, fmt.Errorf("wasm cache: %w", err)
	}
	used := map[string]bool{}
	var entries []*urlEntry
	for _, de := range ides {
		p := filepath.Join(s.index, de.Name())
		b, err := os.ReadFile(p)
		var e urlEntry
		if err == nil {
			err = json.Unmarshal(b, &e)
		}
		if err != nil || e.URL == "" || s.entryPath(e.URL) != p {
			_ = os.Remove(p)
			continue
		}
		if _, ok := sizes[e.Module]; !ok {
			_ = os.Remove(p)
			continue
		}
		used[e.Module] = true
		entries = append(entries, &e)
	}
	for sha := range sizes {
		if !used[sha] {
			_ = os.Remove(s.modulePath(sha))
			delete(sizes, sha)
		}
	}
	return entries, sizes, nil
}

// verifyFile reports whether the file's sha256 is sha, and its size.
func verifyFile(p, sha string) (int64, bool) {
	f, err := os.Open(p)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, false
	}
	return n, hex.EncodeToString(h.Sum(nil)) == sha
}
