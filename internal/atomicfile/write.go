// Package atomicfile replaces files so that a reader sees the old content or the new, never a
// partial file: the data goes to a temporary file in the same directory, which is renamed over
// the target.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Options tune Write.
type Options struct {
	// DirMode creates missing parent directories with this mode (0 means 0755).
	DirMode os.FileMode
	// Sync flushes the data to disk before the rename (for files that must survive a crash).
	Sync bool
	// ExactDirMode sets the parent directory's mode to DirMode even when it exists or the
	// umask trimmed it (for a tree another user, such as Envoy, must read).
	ExactDirMode bool
}

// IsTemp reports whether a file name is one of Write's temporary names, which a crash during a
// write may leave behind.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// Write replaces path with data, mode mode (set explicitly, whatever the umask). The temporary
// file is ".<name>.tmp-*" in the same directory and is removed on failure.
func Write(path string, data []byte, mode os.FileMode, o Options) error {
	return WriteFunc(path, mode, o, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is Write for content produced by write, streamed into the temporary file (a large
// file is never held whole in memory). An error from write leaves path as it was.
func WriteFunc(path string, mode os.FileMode, o Options, write func(io.Writer) error) error {
	if o.DirMode == 0 {
		o.DirMode = 0o755
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, o.DirMode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if o.ExactDirMode {
		if err := os.Chmod(dir, o.DirMode); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(mode) // before any byte is written: a private file is never readable by others
	if err == nil {
		err = write(f)
	}
	if err == nil && o.Sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
