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

// setKeyReference is how NodeMetadata set a typed field before setKey: the key and value
// marshalled as a one-key object and unmarshalled into the typed struct.
func setKeyReference(m *Metadata, k string, v any) error {
	one, err := json.Marshal(map[string]any{k: v})
	if err != nil {
		return err
	}
	return json.Unmarshal(one, (*metadataFields)(m))
}

// metadataKeyVariants are spellings of a typed key encoding/json matches by folding (or not).
func metadataKeyVariant(r *rand.Rand) string {
	k := metadataFieldTable[r.IntN(len(metadataFieldTable))].name
	switch r.IntN(7) {
	case 0:
		return strings.ToLower(k)
	case 1:
		return strings.ReplaceAll(k, "K", "\u212a") // KELVIN SIGN folds to k
	case 2:
		return strings.ReplaceAll(strings.ToLower(k), "s", "\u017f") // LONG S folds to s
	case 3:
		return k + "\xff"
	case 4:
		return randomString(r)
	default:
		return k
	}
}

// metadataValues are values as NodeMetadata finds them: strings from the environment (bool
// spellings, lists, JSON held in strings, invalid UTF-8) and decoded JSON of every shape.
func randomMetadataValue(r *rand.Rand) any {
	switch r.IntN(6) {
	case 0:
		return []string{"true", "false", "1", "T", "yes", "", "a,b,,c", "15020", "null"}[r.IntN(9)]
	case 1:
		return []string{`[{"containerPort":9080,"protocol":"TCP"}]`, `[{"name":"<h>","containerPort":80.0}]`, `[]`, `null`, `{}`, `[{"CONTAINERPORT":1}]`, `[null]`, ``}[r.IntN(8)]
	case 2:
		return randomString(r)
	case 3:
		var v any
		if err := json.Unmarshal([]byte(randomRawJSON(r, 0)), &v); err != nil {
			return nil // 1e400 is JSON but no float64
		}
		return v
	case 4:
		return []any{map[string]any{"concurrency": 2.0, "serviceCluster": "x"}, map[string]any{"a": "b", "c": nil}, []any{"a", nil}, 15020.0, 1e21, 1.5, nil, true}[r.IntN(8)]
	default:
		return randomAny(r, 0)
	}
}

// TestMetadataSetKeyMatchesReference applies the same random (key, value) sequences with setKey
// and with the encoding/json round trip and requires the same Metadata and the same failures.
func TestMetadataSetKeyMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 16))
	for i := range 3000 {
		var got, want Metadata
		for j := range 1 + r.IntN(4) {
			k, v := metadataKeyVariant(r), randomMetadataValue(r)
			gerr, werr := got.setKey(k, v), setKeyReference(&want, k, v)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("case %d.%d: key %q value %#v: setKey error %v, encoding/json error %v", i, j, k, v, gerr, werr)
			}
			if werr != nil {
				break
			}
			requireSameMetadata(t, fmt.Sprintf("case %d.%d key %q value %#v", i, j, k, v), &got, &want)
		}
	}
}

func requireSameMetadata(t testing.TB, what string, got, want *Metadata) {
	t.Helper()
	g, w := *got, *want
	gpc, _ := json.Marshal(g.ProxyConfig) // protos are compared by their JSON, not their internals
	wpc, _ := json.Marshal(w.ProxyConfig)
	if string(gpc) != string(wpc) {
		t.Fatalf("%s: PROXY_CONFIG %s, want %s", what, gpc, wpc)
	}
	g.ProxyConfig, w.ProxyConfig = nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, g, w)
	}
}

// FuzzMetadataSetKey: any key with any string value, and with any JSON value, is set as the
// encoding/json round trip sets it.
func FuzzMetadataSetKey(f *testing.F) {
	f.Add("ENABLE_HBONE", "true", `{"a":"b"}`)
	f.Add("labels", "x", `{"k":null,"j":"v"}`)
	f.Add("POD_PORTS", `[{"containerPort":1}]`, `"[]"`)
	f.Add("envoy_status_port", "1", `15020`)
	f.Add("PILOT_SAN", "\xff", `["a",null]`)
	f.Add("METADATA_DISCOVERY", "0", `null`)
	f.Fuzz(func(t *testing.T, k, s, js string) {
		var jv any
		values := []any{s}
		if json.Unmarshal([]byte(js), &jv) == nil {
			values = append(values, jv)
		}
		for _, v := range values {
			var got, want Metadata
			gerr, werr := got.setKey(k, v), setKeyReference(&want, k, v)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("key %q value %#v: setKey error %v, encoding/json error %v", k, v, gerr, werr)
			}
			if werr == nil {
				requireSameMetadata(t, fmt.Sprintf("key %q value %#v", k, v), &got, &want)
			}
		}
	})
}

// TestNodeMetadataCaseFoldLastKeyWins: keys naming one typed field ignoring case set it in
// sorted byte order, the last winning. Expected values established from Istio's
// GetNodeMetaData (pkg/bootstrap/config.go, 1.30.3 and master 86c9f01): the untyped map is
// json.Marshal'ed (encoding/json sorts map keys by byte order) and json.Unmarshal'ed into
// BootstrapNodeMetadata, which assigns each key in document order to the field it names
// exactly or ignoring case; marshalMetadata (option/convert.go) then writes the typed field
// and adds each raw key the typed JSON lacks. Found by FuzzNodeMetadata in CI: the agent set
// fields in map order, so the winner changed from run to run. Map order is random per range,
// hence the repetitions.
func TestNodeMetadataCaseFoldLastKeyWins(t *testing.T) {
	for range 20 {
		cfg := baseConfig(t)
		cfg.Env = append(cfg.Env,
			`ISTIO_META_POD_PORTS=[{"containerPort":1}]`,
			`ISTIO_METAJSON_X={"POd_PORTS":"[{\"containerPort\":2}]","Pod_Ports":"[{\"containerPort\":3}]"}`,
			`ISTIO_META_pOD_PORTS=[{"containerPort":4}]`)
		m, err := NodeMetadata(cfg, cfg.IPs)
		if err != nil {
			t.Fatal(err)
		}
		// "POD_PORTS" < "POd_PORTS" < "Pod_Ports" < "pOD_PORTS": the last one's value.
		if len(m.PodPorts) != 1 || m.PodPorts[0].ContainerPort != 4 {
			t.Fatalf("POD_PORTS = %+v, want the value of pOD_PORTS (containerPort 4)", m.PodPorts)
		}
		b, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`"POD_PORTS":"[{\"containerPort\":4}]"`,
			`"POd_PORTS":"[{\"containerPort\":2}]"`,
			`"Pod_Ports":"[{\"containerPort\":3}]"`,
			`"pOD_PORTS":"[{\"containerPort\":4}]"`,
		} {
			if !strings.Contains(string(b), want) {
				t.Fatalf("metadata JSON lacks %s:\n%s", want, b)
			}
		}
	}
}
