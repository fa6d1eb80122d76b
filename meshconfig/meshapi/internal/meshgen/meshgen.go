// Package meshgen generates meshconfig/meshapi from istio.io/api: plain Go types for ProxyConfig's
// closure, shaped as protoc-gen-go shapes them (so bootstrap templates written for Istio read the
// same fields), and the trimmed descriptor sets of MeshConfig and of ProxyConfig that meshapi
// parses with. Only the generator and tests link it (and through it istio.io/api); pilot-agent does not.
package meshgen

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// Output file names, in meshconfig/meshapi.
const (
	GoFile   = "types.gen.go"
	JSONFile = "protojson.gen.go"
	DescFile = "mesh.pb.gz"
	// ProxyDescFile is ProxyConfig's closure alone: what the agent builds at start when no mesh
	// file is given (about half of DescFile; MeshConfig's own file is the other half).
	ProxyDescFile = "proxy.pb.gz"
)

// Build returns the generated files by name.
func Build() (map[string][]byte, error) {
	pc := (&meshv1alpha1.ProxyConfig{}).ProtoReflect().Descriptor()
	mc := (&meshv1alpha1.MeshConfig{}).ProtoReflect().Descriptor()
	version, err := apiVersion()
	if err != nil {
		return nil, err
	}
	src, err := goSource("meshapi", version, pc, hasJSONShim, hasDeepCopy)
	if err != nil {
		return nil, err
	}
	js, err := jsonSource("meshapi", version, pc)
	if err != nil {
		return nil, err
	}
	desc, err := descriptorSet(mc, pc)
	if err != nil {
		return nil, err
	}
	proxyDesc, err := descriptorSet(pc)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{GoFile: src, JSONFile: js, DescFile: desc, ProxyDescFile: proxyDesc}, nil
}

// hasJSONShim says whether istio.io/api's Go type for name has the MarshalJSON its
// protoc-gen-jsonshim adds (encoding/json then writes the protobuf JSON mapping).
func hasJSONShim(name protoreflect.FullName) bool {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		return false
	}
	_, ok := mt.New().Interface().(json.Marshaler)
	return ok
}

// hasDeepCopy says whether istio.io/api's Go type for name has the DeepCopy its deepcopy shim adds.
func hasDeepCopy(name protoreflect.FullName) bool {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		return false
	}
	_, ok := reflect.TypeOf(mt.New().Interface()).MethodByName("DeepCopy")
	return ok
}

// apiVersion is the version of istio.io/api in go.mod (Istio tags its API with its release).
func apiVersion() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "istio.io/api").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m istio.io/api: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
