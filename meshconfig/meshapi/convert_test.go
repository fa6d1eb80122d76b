package meshapi

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
)

func TestFromDynamicRefusesOtherType(t *testing.T) {
	m, err := NewDynamic(MeshConfigName)
	if err != nil {
		t.Fatal(err)
	}
	err = FromDynamic(m, &ProxyConfig{})
	if err == nil || !strings.Contains(err.Error(), "MeshConfig") || !strings.Contains(err.Error(), "ProxyConfig") {
		t.Fatalf("err = %v, want one naming both types", err)
	}
}

func TestNilAndEmpty(t *testing.T) {
	var nilPC *ProxyConfig
	m, err := ToDynamic(nilPC)
	if err != nil || m.Descriptor().FullName() != ProxyConfigName {
		t.Fatalf("ToDynamic(nil) = %v, %v", m, err)
	}
	b, err := MarshalProtoJSON(nilPC)
	if err != nil || string(b) != "{}" {
		t.Fatalf("MarshalProtoJSON(nil) = %s, %v", b, err)
	}
	if nilPC.GetTracing().GetZipkin().GetAddress() != "" || nilPC.GetServiceCluster() != "" {
		t.Fatal("getters on nil must return zero values")
	}
}

// TestFromDynamicReplaces: FromDynamic leaves nothing of what x held before, and shares no
// memory with the dynamic message (lists, maps, well-known types are copied).
func TestFromDynamicReplaces(t *testing.T) {
	pc := &ProxyConfig{StatusPort: 1, ProxyMetadata: map[string]string{"OLD": "x"}}
	doc := `{"drainDuration": "3s", "proxyMetadata": {"A": "1"}, "proxyStatsMatcher": {"inclusionPrefixes": ["p"]}}`
	if err := UnmarshalProtoJSON([]byte(doc), pc, protojson.UnmarshalOptions{}); err != nil {
		t.Fatal(err)
	}
	if pc.StatusPort != 0 || len(pc.ProxyMetadata) != 1 || pc.ProxyMetadata["A"] != "1" ||
		pc.GetDrainDuration().AsDuration() != 3*time.Second || pc.GetProxyStatsMatcher().GetInclusionPrefixes()[0] != "p" {
		t.Fatalf("got %v", pc)
	}
	m, err := ToDynamic(pc)
	if err != nil {
		t.Fatal(err)
	}
	pc.DrainDuration.Seconds = 99
	pc.ProxyMetadata["A"] = "changed"
	back := &ProxyConfig{}
	if err := FromDynamic(m, back); err != nil {
		t.Fatal(err)
	}
	if back.GetDrainDuration().AsDuration() != 3*time.Second || back.ProxyMetadata["A"] != "1" {
		t.Fatalf("ToDynamic shares memory with its input: %v", back)
	}
}
