package bootstrap

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wingman-mesh/wingman/bootstrap/envoyproto"
)

// FuzzNodeMetadata feeds fuzzed ISTIO_META_ and ISTIO_METAJSON_ values (bytes from the pod spec)
// through NodeMetadata and Render. A refused value must be an error naming its variable; an
// accepted one must render a bootstrap Envoy's protos accept, whose node.metadata is the
// metadata's own JSON, and that JSON must read back (UnmarshalJSON) to the same bytes.
func FuzzNodeMetadata(f *testing.F) {
	f.Add("reviews-v1", `{"a":1,"b":[true,null,"<x>"]}`, `[{"containerPort":80}]`, "true")
	f.Add("\u2028&", `{"LABELS":{"k":"v"},"NAMESPACE":"ns"}`, `[]`, "false")
	f.Add("x", `{"POD_PORTS":"[{\"containerPort\":80}]","PILOT_SAN":["a"],"labels":{"x":"y"}}`, "", "yes")
	f.Add("\xff\xfe", `{"HTTP10":1}`, `{`, "1")
	f.Fuzz(func(t *testing.T, workload, metaJSON, ports, http10 string) {
		cfg := baseConfig(t)
		cfg.Env = append(cfg.Env,
			"ISTIO_META_WORKLOAD_NAME="+workload, "ISTIO_META_FUZZ="+workload,
			"ISTIO_METAJSON_FUZZ="+metaJSON, "ISTIO_META_POD_PORTS="+ports, "ISTIO_META_HTTP10="+http10)
		m, err := NodeMetadata(cfg, cfg.IPs)
		if err != nil {
			if !strings.Contains(err.Error(), "ISTIO_META") {
				t.Fatalf("error names no variable: %v", err)
			}
			return
		}
		b, err := m.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted metadata does not marshal: %v", err)
		}
		var back Metadata
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("metadata JSON does not read back: %v\n%s", err, b)
		}
		again, err := back.MarshalJSON()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("metadata round trip changed it (%v):\n%s\n%s", err, b, again)
		}
		out, err := Render(cfg)
		if err != nil {
			t.Fatalf("metadata accepted, render refused: %v", err)
		}
		for _, v := range envoyproto.Validate(out) {
			t.Errorf("Envoy's protos refuse the render: %s", v)
		}
		var doc struct {
			Node struct{ Metadata json.RawMessage } `json:"node"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, doc.Node.Metadata); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(compact.Bytes(), b) {
			t.Fatalf("node.metadata is not the metadata's JSON:\n%s\n%s", compact.Bytes(), b)
		}
	})
}
