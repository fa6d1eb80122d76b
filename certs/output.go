package certs

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/wingman-mesh/wingman/internal/atomicfile"
)

// writeOutput writes key.pem, cert-chain.pem and root-cert.pem to OutputCertsDir when set.
// Failures are logged: the certificate is already in service.
func (m *Manager) writeOutput(w *workload) {
	dir := m.cfg.OutputCertsDir
	if dir == "" {
		return
	}
	mode := os.FileMode(m.cfg.OutputCertsMode)
	for _, f := range []struct {
		name string
		data []byte
	}{{"key.pem", w.keyPEM}, {"cert-chain.pem", w.chainPEM}, {"root-cert.pem", w.rootPEM}} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, mode); err != nil {
			m.log.Error("OUTPUT_CERTS write failed", "err", err)
		}
	}
}

// writeFileAtomic replaces path with data (when it differs) through a temporary file in the same
// directory and a rename, so readers see the old file or the new one, never a partial one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm() == mode {
			return nil
		}
	}
	return atomicfile.Write(path, data, mode, atomicfile.Options{Sync: true})
}
