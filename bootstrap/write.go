package bootstrap

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically (temp file in the same directory, rename), creating
// the directory with mode 0700 as Istio does. A reader never sees a partial file. There is no
// fsync: the bootstrap files are rendered again at every start and read at once by a local
// process, so durability across a machine crash buys nothing and an fsync would sit on the
// start-up path (1-3 ms here).
func WriteFile(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// OutputPath is where Istio writes the rendered bootstrap: <configPath>/envoy-rev.json.
func OutputPath(cfg Config) string {
	return filepath.Join(cfg.ProxyConfig.GetConfigPath(), "envoy-rev.json")
}
