package envoyproto

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// MergeOverride merges an override (YAML or JSON, already $(HOST_IP)-substituted) into a bootstrap
// exactly as Envoy merges --config-yaml into -c: proto MergeFrom, so set scalars replace, messages
// merge, repeated fields append, map entries replace by key, and setting a oneof member replaces
// the other. The result is indented JSON with Envoy's proto field names.
func MergeOverride(bootstrapJSON, override []byte) ([]byte, error) {
	reg, err := loadRegistry()
	if err != nil {
		return nil, err
	}
	in := protojson.UnmarshalOptions{Resolver: reg.types}
	base := reg.newBootstrap()
	if err := in.Unmarshal(bootstrapJSON, base); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	js, err := yaml.YAMLToJSON(override)
	if err != nil {
		return nil, fmt.Errorf("ISTIO_BOOTSTRAP_OVERRIDE: not YAML or JSON: %w", err)
	}
	over := reg.newBootstrap()
	if err := in.Unmarshal(js, over); err != nil {
		return nil, fmt.Errorf("ISTIO_BOOTSTRAP_OVERRIDE: %w", err)
	}
	proto.Merge(base, over)
	out, err := protojson.MarshalOptions{UseProtoNames: true, Resolver: reg.types}.Marshal(base)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: marshal merged: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "  "); err != nil { // also normalises protojson's whitespace
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}
