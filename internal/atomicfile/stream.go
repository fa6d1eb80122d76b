package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

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
