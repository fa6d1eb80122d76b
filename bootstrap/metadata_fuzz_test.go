package bootstrap

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/wingman-mesh/wingman/bootstrap/envoyproto"
)

// FuzzNodeMetadata feeds fuzzed ISTIO_META_ and ISTIO_METAJSON_ values (bytes from the pod spec)
// through NodeMetadata and Render. A refused value must be an error naming its variable; an
// accepted one must render a bootstrap Envoy's protos accept, whose node.metadata is the
// metadata's own JSON, and that JSON must read back (UnmarshalJSON) to the same value.
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
		checkMetadataRoundTrip(t, b)
		out, err := Render(t.Context(), cfg)
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

// checkMetadataRoundTrip checks that metadata JSON b reads back (as Istiod reads it) to the
// same JSON, bytes aside from invalid UTF-8 written once as \ufffd, and is then a fixed point.
func checkMetadataRoundTrip(t *testing.T, b []byte) {
	t.Helper()
	var back Metadata
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("metadata JSON does not read back: %v\n%s", err, b)
	}
	if k := keyFoldingOntoTypedKey(back.Raw); k != "" {
		// A raw key such as "pod_ports" beside the typed "POD_PORTS": encoding/json reads
		// either into the one field, the last in sorted order winning, in Istio as here, so an
		// agent-set value of that field (INSTANCE_IPS, ...) does not read back.
		// TestNodeMetadataCaseFoldLastKeyWins checks which value the agent writes.
		return
	}
	again, err := back.MarshalJSON()
	if err != nil || !sameJSON(t, again, b) {
		t.Fatalf("metadata round trip changed it (%v):\n%s\n%s", err, b, again)
	}
	// Bytes may differ once: a raw value's invalid UTF-8 is written as \ufffd, as encoding/json
	// writes it in Istio's agent, and reads back as U+FFFD. After that the JSON is a fixed point.
	var back2 Metadata
	if err := json.Unmarshal(again, &back2); err != nil {
		t.Fatal(err)
	}
	if third, err := back2.MarshalJSON(); err != nil || !bytes.Equal(third, again) {
		t.Fatalf("metadata JSON is not a fixed point (%v):\n%s\n%s", err, again, third)
	}
}

// sameJSON reports whether a and b decode to the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(va, vb)
}

// keyFoldingOntoTypedKey is a key of raw that is not a typed metadata key but names one
// ignoring case, or "".
func keyFoldingOntoTypedKey(raw map[string]any) string {
	for k := range raw {
		if f := findMetadataField(k); f != nil && f.name != k {
			return k
		}
	}
	return ""
}
