package meshlab

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wingman-mesh/wingman/lab/controlplane"
)

// ServerName is the DNS name in meshlab's serving certificate, Istiod's name as the agent
// expects it (give it to the agent as ISTIOD_SAN).
const ServerName = controlplane.ServerName

// Paths of the files meshlab writes under Config.OutputDir, relative as the agent reads them.
const (
	RootCertPath = "var/run/secrets/istio/root-cert.pem"
	TokenPath    = "var/run/secrets/tokens/istio-token"
)

// randomToken returns a fresh bearer token.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("meshlab: token: %w", err)
	}
	return "meshlab-" + hex.EncodeToString(b), nil
}

// writeAgentFiles writes the root bundle and the token under root.
func writeAgentFiles(root string, rootBundle []byte, token string) error {
	for _, f := range []struct {
		rel  string
		data []byte
	}{{RootCertPath, rootBundle}, {TokenPath, []byte(token)}} {
		path := filepath.Join(root, f.rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("meshlab: %w", err)
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o644); err != nil {
			return fmt.Errorf("meshlab: write %s: %w", path, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("meshlab: write %s: %w", path, err)
		}
	}
	return nil
}
