package meshapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"text/template"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// fill sets every field of m (recursively, to depth) to a value that is not the default, taking
// member pick%n of each oneof, so that a round trip through our types covers every field kind.
func fill(m protoreflect.Message, pick, depth int) {
	fds := m.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if od := fd.ContainingOneof(); od != nil && od.Fields().Get(pick%od.Fields().Len()) != fd {
			continue
		}
		switch {
		case fd.IsMap():
			mm := m.Mutable(fd).Map()
			for k := range 2 {
				key := protoreflect.ValueOfString(fmt.Sprintf("k%d", k)).MapKey()
				v := mm.NewValue()
				if fd.MapValue().Message() != nil {
					if depth > 0 {
						fill(v.Message(), pick+k, depth-1)
					}
				} else {
					v = scalar(fd.MapValue(), k+1)
				}
				mm.Set(key, v)
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for k := range 2 {
				if fd.Message() != nil {
					v := l.NewElement()
					if depth > 0 {
						fill(v.Message(), pick+k, depth-1)
					}
					l.Append(v)
				} else {
					l.Append(scalar(fd, k+1))
				}
			}
		case fd.Message() != nil:
			v := m.NewField(fd)
			if depth > 0 {
				fillWellKnownOrMessage(v.Message(), pick, depth-1)
			}
			m.Set(fd, v)
		default:
			m.Set(fd, scalar(fd, pick+1))
		}
	}
}

func fillWellKnownOrMessage(m protoreflect.Message, pick, depth int) {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Duration":
		m.Set(m.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(int64(7+pick)))
		m.Set(m.Descriptor().Fields().ByName("nanos"), protoreflect.ValueOfInt32(5000))
		return
	}
	fill(m, pick, depth)
}

func scalar(fd protoreflect.FieldDescriptor, n int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(n % vals.Len()).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(-n - 3))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(1<<40 + n))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n + 3))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(1<<41 + n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) + 0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) + 0.25)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("s%d-%s", n, fd.Name()))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{byte(n), 0, 1})
	}
	panic(fd.Kind())
}

// richConfigs returns istio.io/api ProxyConfigs with every field set, one for each member of
// the largest oneof.
func richConfigs() []*meshv1alpha1.ProxyConfig {
	var out []*meshv1alpha1.ProxyConfig
	for pick := range 5 {
		pc := &meshv1alpha1.ProxyConfig{}
		fill(pc.ProtoReflect(), pick, 6)
		out = append(out, pc)
	}
	return out
}

// TestRoundTripMatchesIstio: a ProxyConfig with every field set goes Istio's type -> protojson ->
// ours -> protojson -> Istio's type unchanged, and ours prints the same JSON (protojson, and
// encoding/json through the MarshalJSON shim), and the same text (String) as Istio's. The
// expected values are istio.io/api's own output.
func TestRoundTripMatchesIstio(t *testing.T) {
	for i, theirs := range richConfigs() {
		js, err := protojson.Marshal(theirs)
		if err != nil {
			t.Fatal(err)
		}
		ours := &ProxyConfig{}
		if err := UnmarshalProtoJSON(js, ours, protojson.UnmarshalOptions{}); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		back, err := MarshalProtoJSON(ours)
		if err != nil {
			t.Fatal(err)
		}
		again := &meshv1alpha1.ProxyConfig{}
		if err := protojson.Unmarshal(back, again); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(theirs, again) {
			t.Fatalf("%d: round trip changed the config:\n%s\n%s", i, js, back)
		}
		if compact(t, js) != compact(t, back) {
			t.Errorf("%d: protojson differs:\n%s\n%s", i, js, back)
		}
		a, err := json.Marshal(theirs)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(ours)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%d: encoding/json differs:\n%s\n%s", i, a, b)
		}
		if theirs.String() != ours.String() {
			t.Errorf("%d: String differs:\n%s\n%s", i, theirs.String(), ours.String())
		}
		cp := ours.GetReadinessProbe().DeepCopy()
		if cp.String() != ours.GetReadinessProbe().String() || cp == ours.GetReadinessProbe() {
			t.Errorf("%d: DeepCopy is not a deep copy", i)
		}
	}
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestTemplateExpressionsMatchIstio runs expressions a custom bootstrap template may use on
// .config over Istio's type and ours: the output must be the same.
func TestTemplateExpressionsMatchIstio(t *testing.T) {
	exprs := []string{
		`{{ .config.DiscoveryAddress }}`, `{{ .config.Concurrency.Value }}`, `{{ .config.ProxyMetadata }}`,
		`{{ range $k, $v := .config.ProxyMetadata }}{{ $k }}={{ $v }};{{ end }}`,
		`{{ .config.Tracing.GetZipkin.Address }}`, `{{ .config.GetDrainDuration }}`, `{{ .config.DrainDuration.Seconds }}`,
		`{{ .config.ControlPlaneAuthPolicy }}`, `{{ printf "%d" .config.ControlPlaneAuthPolicy }}`,
		`{{ eq .config.ControlPlaneAuthPolicy 1 }}`, `{{ .config.GetServiceCluster }}`, `{{ .config.GetTracingServiceName }}`,
		`{{ .config.ClusterName }}`, `{{ .config.Tracing }}`, `{{ toJSON .config.Tracing }}`, `{{ toJSON .config }}`,
		`{{ with .config.Tracing.GetLightstep }}{{ .AccessToken }}{{ end }}`, `{{ .config.Tracing.CustomTags }}`,
		`{{ .config.ReadinessProbe.GetHttpGet.Port }}`, `{{ .config.ProxyStatsMatcher.InclusionPrefixes }}`,
		`{{ .config.InterceptionMode.String }}`, `{{ .config.Image.ImageType }}`, `{{ .config.GetTracing.GetSampling }}`,
		`{{ .config.HoldApplicationUntilProxyStartsOrDefault }}`,
	}
	funcs := template.FuncMap{"toJSON": func(v any) string { b, _ := json.Marshal(v); return string(b) }}
	configs := append(richConfigs(), &meshv1alpha1.ProxyConfig{})
	for i, theirs := range configs {
		js, err := protojson.Marshal(theirs)
		if err != nil {
			t.Fatal(err)
		}
		ours := &ProxyConfig{}
		if err := UnmarshalProtoJSON(js, ours, protojson.UnmarshalOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, e := range exprs {
			tmpl, err := template.New("t").Funcs(funcs).Option("missingkey=zero").Parse(e)
			if err != nil {
				t.Fatal(err)
			}
			var a, b strings.Builder
			errA := tmpl.Execute(&a, map[string]any{"config": theirs})
			errB := tmpl.Execute(&b, map[string]any{"config": ours})
			if a.String() != b.String() || (errA == nil) != (errB == nil) {
				t.Errorf("config %d: %s: ours %q (%v), Istio's %q (%v)", i, e, b.String(), errB, a.String(), errA)
			}
		}
	}
}
