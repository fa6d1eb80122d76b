package istiod

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// headers is the metadata sent on every call, as key, value pairs.
func headers(cfg *Config) []string {
	kv := make([]string, 0, 2+2*len(cfg.Metadata))
	if cfg.ClusterID != "" {
		kv = append(kv, "ClusterID", cfg.ClusterID)
	}
	for k, v := range cfg.Metadata {
		kv = append(kv, k, v)
	}
	return kv
}

// readToken reads the bearer token from file, fresh on every call; "" when there is none (no
// file configured, a missing file or an empty token: as Istio, no header). On Istiod's
// plaintext port the token is sent too, as Istio's agent sends it.
func readToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("istiod: read token %s: %w", file, err)
	}
	return strings.TrimSpace(string(b)), nil
}
