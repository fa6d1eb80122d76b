package proxyconfig

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestUnknownFieldsNamedInWarning: a PROXY_CONFIG with fields this build does not know still
// loads (as Istio's agent does), and the warning names every unknown field with its path.
func TestUnknownFieldsNamedInWarning(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	pc, err := Load(Sources{ProxyConfigEnv: `{"someFutureField": 3, "statusPort": 15099,
		"tracing": {"zipkin": {"address": "z:9411", "newKnob": true}},
		"proxyStatsMatcher": {"inclusionPrefixes": ["a"], "exclusionSomething": 1},
		"drainDuration": "5s", "proxyMetadata": {"ANY_KEY": "is fine"}}`, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if pc.GetStatusPort() != 15099 || pc.GetTracing().GetZipkin().GetAddress() != "z:9411" {
		t.Fatalf("known fields lost: %v", pc)
	}
	out := logs.String()
	for _, want := range []string{"PROXY_CONFIG", "someFutureField", "tracing.zipkin.newKnob", "proxyStatsMatcher.exclusionSomething"} {
		if !strings.Contains(out, want) {
			t.Errorf("warning lacks %s:\n%s", want, out)
		}
	}
	for _, known := range []string{"ANY_KEY", "drainDuration", "inclusionPrefixes"} {
		if strings.Contains(out, "fields="+known) || strings.Contains(out, ", "+known) {
			t.Errorf("known field %s reported as unknown:\n%s", known, out)
		}
	}
}
