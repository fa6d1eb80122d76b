package proxyconfig

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"sigs.k8s.io/yaml"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// ParseProxyConfig parses one ProxyConfig document (YAML or JSON). Like Istio, a field this build
// does not know is tolerated (logged) so that a newer control plane's config does not stop the pod;
// a known field of the wrong type or value is an error naming source and field.
func ParseProxyConfig(doc []byte, source string, log *slog.Logger) (*meshapi.ProxyConfig, error) {
	m, err := parseProxyConfigLayer(doc, source, log, nil)
	if err != nil {
		return nil, err
	}
	pc := &meshapi.ProxyConfig{}
	if err := meshapi.FromDynamic(m, pc); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return pc, nil
}

// parseProxyConfigLayer parses one ProxyConfig document into a dynamic message of descriptor md
// (nil: meshapi's ProxyConfig set), which mergeProxyConfig lays over the config so far. Load passes
// the mesh file's ProxyConfig when it parsed one, so that a start builds one descriptor set, not two.
func parseProxyConfigLayer(doc []byte, source string, log *slog.Logger, md protoreflect.MessageDescriptor) (*dynamicpb.Message, error) {
	if md == nil {
		var err error
		if md, err = meshapi.Descriptor(meshapi.ProxyConfigName); err != nil {
			return nil, err
		}
	}
	m := dynamicpb.NewMessage(md)
	if err := parseInto(doc, m, source, log); err != nil {
		return nil, err
	}
	if err := checkTracerKeys(doc, "", source, tracingOf(md)); err != nil {
		return nil, err
	}
	return m, nil
}

// parseMeshConfig parses a MeshConfig document (the mesh file) into a dynamic message; only its
// defaultConfig is used, but every field is parsed and checked, as Istio does.
func parseMeshConfig(doc []byte, source string, log *slog.Logger) (*dynamicpb.Message, error) {
	mc, err := meshapi.NewDynamic(meshapi.MeshConfigName)
	if err != nil {
		return nil, err
	}
	if err := parseInto(doc, mc, "mesh config "+source, log); err != nil {
		return nil, err
	}
	if err := checkTracerKeys(doc, "defaultConfig", "mesh config "+source, tracingOf(defaultConfigDesc(mc.Descriptor()))); err != nil {
		return nil, err
	}
	return mc, nil
}

// defaultConfigDesc is the ProxyConfig descriptor of MeshConfig's defaultConfig (nil if absent).
func defaultConfigDesc(mesh protoreflect.MessageDescriptor) protoreflect.MessageDescriptor {
	if fd := mesh.Fields().ByName("default_config"); fd != nil {
		return fd.Message()
	}
	return nil
}

// tracingOf is the Tracing descriptor of ProxyConfig descriptor pc (nil if absent).
func tracingOf(pc protoreflect.MessageDescriptor) protoreflect.MessageDescriptor {
	if pc == nil {
		return nil
	}
	if fd := pc.Fields().ByName("tracing"); fd != nil {
		return fd.Message()
	}
	return nil
}

// defaultConfigOf returns mesh's defaultConfig, or nil when it has none.
func defaultConfigOf(mesh protoreflect.Message) protoreflect.Message {
	fd := mesh.Descriptor().Fields().ByName("default_config")
	if fd == nil || !mesh.Has(fd) {
		return nil
	}
	return mesh.Get(fd).Message()
}

func parseInto(doc []byte, m proto.Message, source string, log *slog.Logger) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return fmt.Errorf("%s: not YAML or JSON: %w", source, err)
	}
	if string(js) == "null" {
		return nil // an empty document says nothing
	}
	strictErr := protojson.Unmarshal(js, m)
	if strictErr == nil {
		return nil
	}
	// Retry tolerating unknown fields: if that succeeds, the only problem was a field this build does
	// not know, which Istio also accepts.
	tolerant := protojson.UnmarshalOptions{DiscardUnknown: true}
	if err := tolerant.Unmarshal(js, m); err != nil {
		return fmt.Errorf("%s: %w", source, explain(js, m.ProtoReflect().Descriptor(), tolerant, err))
	}
	if log != nil {
		log.Warn("ignoring unknown fields", "source", source,
			"fields", strings.Join(unknownFields(js, m.ProtoReflect().Descriptor()), ", "), "detail", strictErr.Error())
	}
	return nil
}

// checkTracerKeys rejects a tracing block naming a tracer this agent does not know. Unknown fields
// are otherwise tolerated, but a tracer the user asked for and silently did not get is a bug report
// waiting to happen; Istio drops it without a word. tracing is the Tracing descriptor to check
// against (nil: meshapi's).
func checkTracerKeys(doc []byte, under, source string, tracing protoreflect.MessageDescriptor) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil // already reported by parseInto
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(js, &top) != nil {
		return nil
	}
	prefix := ""
	if under != "" {
		var inner map[string]json.RawMessage
		if json.Unmarshal(top[under], &inner) != nil {
			return nil
		}
		top, prefix = inner, under+"."
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(top["tracing"], &keys) != nil {
		return nil
	}
	if tracing == nil {
		var err error
		if tracing, err = meshapi.Descriptor(tracingName); err != nil {
			return err
		}
	}
	known := tracing.Fields()
	var unknown []string
	for k := range keys {
		if known.ByJSONName(k) == nil && known.ByName(protoreflectName(k)) == nil {
			unknown = append(unknown, prefix+"tracing."+k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	// Sorted, so that the same document always gives the same error (map order is random).
	sort.Strings(unknown)
	what := "field " + unknown[0]
	if len(unknown) > 1 {
		what = "fields " + strings.Join(unknown, ", ")
	}
	return fmt.Errorf("%s: %s: unknown tracer or tracing field (known tracers: zipkin, lightstep, datadog, stackdriver, openCensusAgent)", source, what)
}

const tracingName protoreflect.FullName = "istio.mesh.v1alpha1.Tracing"

func protoreflectName(s string) protoreflect.Name { return protoreflect.Name(s) }
