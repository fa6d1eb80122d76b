package bootstrap

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// metadataJSONReference is Metadata.MarshalJSON as it was written before metadata_json.go, with
// encoding/json: the typed struct marshalled, read back as a map, the raw keys it lacks added,
// the map marshalled (sorted keys). The writer must match it byte for byte.
func metadataJSONReference(m *Metadata) ([]byte, error) {
	typed, err := json.Marshal((*metadataFields)(m))
	if err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(typed, &all); err != nil {
		return nil, err
	}
	for k, v := range m.Raw {
		if _, ok := all[k]; ok {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("metadata key %s: %w", k, err)
		}
		all[k] = b
	}
	return json.Marshal(all)
}

func requireMetadataJSON(t testing.TB, what string, m *Metadata) {
	t.Helper()
	want, werr := metadataJSONReference(m)
	got, gerr := m.MarshalJSON()
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: encoding/json error %v, writer error %v", what, werr, gerr)
	}
	if werr == nil {
		requireSame(t, what, got, want)
	}
}

// TestMetadataFieldTable: the table names every json-tagged field of Metadata once, sorted,
// each entry pointing at the field whose tag it carries.
func TestMetadataFieldTable(t *testing.T) {
	var m Metadata
	v := reflect.ValueOf(&m).Elem()
	byName := map[string]uintptr{}
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if name != "-" {
			byName[name] = v.Field(i).Addr().Pointer()
		}
	}
	if len(metadataFieldTable) != len(byName) {
		t.Errorf("table has %d keys, Metadata %d", len(metadataFieldTable), len(byName))
	}
	for i, f := range metadataFieldTable {
		if i > 0 && metadataFieldTable[i-1].name >= f.name {
			t.Errorf("table not sorted at %s", f.name)
		}
		addr, ok := byName[f.name]
		if !ok {
			t.Errorf("table key %s is no json tag of Metadata", f.name)
			continue
		}
		if reflect.ValueOf(f.ptr(&m)).Pointer() != addr {
			t.Errorf("table key %s points at another field", f.name)
		}
	}
}

// TestMetadataMarshalMatchesReference: the node metadata of every golden and parity input, and
// random metadata (typed fields at random set or empty, raw keys that collide with typed keys
// exactly or by case, values of every JSON shape), are written as the encoding/json version did.
func TestMetadataMarshalMatchesReference(t *testing.T) {
	for name, cfg := range parityCases(t) {
		m, err := NodeMetadata(cfg, cfg.IPs)
		if err != nil {
			t.Fatal(err)
		}
		requireMetadataJSON(t, name, m)
	}
	r := rand.New(rand.NewPCG(3, 16))
	for i := range 300 {
		var m Metadata
		fillRandom(r, reflect.ValueOf(&m).Elem(), 0)
		if m.Raw == nil || r.IntN(4) == 0 {
			m.Raw = map[string]any{}
		}
		for range r.IntN(6) {
			k := metadataFieldTable[r.IntN(len(metadataFieldTable))].name
			if r.IntN(3) == 0 {
				k = strings.ToLower(k)
			}
			m.Raw[k] = randomAny(r, 0)
		}
		requireMetadataJSON(t, "random "+strconv.Itoa(i), &m)
	}
}
