package bootstrap

import (
	"os"
	"path/filepath"

	"github.com/wingman-mesh/wingman/internal/atomicfile"
)

// WriteFile writes data to path atomically (temp file in the same directory, rename), creating
// the directory with mode 0700 as Istio does. A reader never sees a partial file. There is no
// fsync: the bootstrap files are rendered again at every start and read at once by a local
// process, so durability across a machine crash buys nothing and an fsync would sit on the
// start-up path (1-3 ms here).
func WriteFile(path string, data []byte, mode os.FileMode) error {
	return atomicfile.Write(path, data, mode, atomicfile.Options{DirMode: 0o700})
}

// OutputPath is where Istio writes the rendered bootstrap: <configPath>/envoy-rev.json.
func OutputPath(cfg Config) string {
	return filepath.Join(cfg.ProxyConfig.GetConfigPath(), "envoy-rev.json")
}
