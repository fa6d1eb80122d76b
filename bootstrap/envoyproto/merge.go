package envoyproto

import (
	"bytes"
	"encoding/json"
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// MergeOverride merges an override (YAML or JSON, already $(HOST_IP)-substituted) into a bootstrap
// exactly as Envoy merges --config-yaml into -c: proto MergeFrom, so set scalars replace, messages
// merge, repeated fields append, map entries replace by key, and setting a oneof member replaces
// the other. The result is indented JSON with Envoy's proto field names.
func MergeOverride(bootstrapJSON, override []byte) ([]byte, error) {
	base := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(bootstrapJSON, base); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	js, err := yaml.YAMLToJSON(override)
	if err != nil {
		return nil, fmt.Errorf("ISTIO_BOOTSTRAP_OVERRIDE: not YAML or JSON: %w", err)
	}
	over := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(js, over); err != nil {
		return nil, fmt.Errorf("ISTIO_BOOTSTRAP_OVERRIDE: %w", err)
	}
	proto.Merge(base, over)
	out, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(base)
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
