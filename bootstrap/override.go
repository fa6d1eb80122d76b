package bootstrap

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// LoadOverride reads the ISTIO_BOOTSTRAP_OVERRIDE file (YAML or JSON), substitutes $(HOST_IP) from
// env, and returns JSON for Envoy's --config-yaml. Envoy does the merge at start; the
// `pilot-agent bootstrap` command shows it with envoyproto.MergeOverride.
func LoadOverride(path string, env []string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ISTIO_BOOTSTRAP_OVERRIDE %s: %w", path, err)
	}
	js, err := yaml.YAMLToJSON([]byte(SubstituteHostIP(string(data), env)))
	if err != nil {
		return nil, fmt.Errorf("ISTIO_BOOTSTRAP_OVERRIDE %s: not YAML or JSON: %w", path, err)
	}
	return js, nil
}
