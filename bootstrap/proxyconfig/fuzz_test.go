package proxyconfig

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// FuzzProxyConfig feeds outside bytes (PROXY_CONFIG, the annotation, the mesh file) through every
// parser of this package: none may panic, and an accepted document must leave a valid config.
// Each document is also parsed into istio.io/api's generated ProxyConfig and MeshConfig with the
// same rules: both must accept or refuse it alike and give the same config. The error texts are
// compared too, deliberately: both come from parseInto, whose explain walks each message's own
// descriptor to name the refused field, so equal texts say istio.io/api's generated descriptors
// refuse the same field path with the same value and type as meshapi's (protojson's own text,
// with its converted-JSON column, is no longer shown).
func FuzzProxyConfig(f *testing.F) {
	for _, s := range []string{
		`{"statusPort": 15030, "proxyMetadata": {"B": "env"}}`,
		"concurrency: 2\ntracing:\n  zipkin:\n    address: z:9411\n",
		"defaultConfig:\n  discoveryAddress: x:1\n",
		`{"tracing":{"datadog":{"address":"$(HOST_IP):8126"}},"drainDuration":"5s"}`,
		"[1, 2]", "null", "", "a: [", `{"concurrency": -1}`,
		`proxy.istio.io/config="statusPort: 1"`,
		`{"clusterName": "x", "tracingServiceName": "CANONICAL_NAME_ONLY", "proxyHeaders": {"server": {"disabled": true}}}`,
		`{"readinessProbe": {"httpGet": {"port": 8080, "httpHeaders": [{"name": "a", "value": "b"}]}}, "image": {"imageType": "distroless"}}`,
		"defaultConfig:\n  tracing:\n    lightstep: {address: 'l:1', accessToken: t}\nenableTracing: true\naccessLogFile: /dev/stdout\n",
		`{"defaultConfig": {"concurrency": "x"}}`, `{"meshMTLS": {"minProtocolVersion": "TLSV1_3"}, "unknownKnob": 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		pc := Default()
		if err := applyLayer(pc, doc, "fuzz", nil, nil); err == nil {
			if err := Validate(pc); err != nil {
				t.Fatalf("accepted layer left an invalid config: %v", err)
			}
		}
		ours, errOurs := ParseProxyConfig(doc, "fuzz", nil)
		theirs := &meshv1alpha1.ProxyConfig{}
		errTheirs := parseInto(doc, theirs, "fuzz", nil)
		if errTheirs == nil {
			errTheirs = checkTracerKeys(doc, "", "fuzz", nil)
		}
		sameOutcome(t, "ProxyConfig", errOurs, errTheirs)
		if errOurs == nil && errTheirs == nil {
			b, err := meshapi.MarshalProtoJSON(ours)
			if err != nil {
				t.Fatal(err)
			}
			back := &meshv1alpha1.ProxyConfig{}
			if err := protojson.Unmarshal(b, back); err != nil {
				t.Fatalf("our output %s does not parse: %v", b, err)
			}
			if !proto.Equal(back, theirs) {
				t.Fatalf("ProxyConfig differs from istio.io/api's:\nours   %s\ntheirs %v", b, theirs)
			}
		}
		_, errOurs = parseMeshConfig(doc, "fuzz", nil)
		errTheirs = parseInto(doc, &meshv1alpha1.MeshConfig{}, "mesh config fuzz", nil)
		if errTheirs == nil {
			errTheirs = checkTracerKeys(doc, "defaultConfig", "mesh config fuzz", nil)
		}
		sameOutcome(t, "MeshConfig", errOurs, errTheirs)
		if js, err := yaml.YAMLToJSON(doc); err == nil {
			md, err := meshapi.Descriptor(meshapi.ProxyConfigName)
			if err != nil {
				t.Fatal(err)
			}
			_ = unknownFields(js, md)
		}
		if ann, err := ParsePodInfo(doc); err == nil {
			_ = applyAnnotations(Default(), ann, "fuzz", nil, nil)
		}
	})
}

func sameOutcome(t *testing.T, what string, ours, theirs error) {
	t.Helper()
	if (ours == nil) != (theirs == nil) || (ours != nil && ours.Error() != theirs.Error()) {
		t.Fatalf("%s: ours %v, istio.io/api's %v", what, ours, theirs)
	}
}
