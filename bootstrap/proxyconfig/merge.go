package proxyconfig

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// mergeProxyConfig lays layer (a parsed ProxyConfig document, or a mesh file's defaultConfig)
// over base with the semantics Istio gets from applying a JSON document onto an existing message:
// a field the layer sets replaces base's, except that nested messages merge field by field; lists
// and maps are replaced whole; well-known types (durations, wrappers) are replaced whole.
// proxyMetadata is the one map merged key by key (Istio's mergeMap). The merge runs on dynamic
// messages (meshapi's descriptors), as it ran on istio.io/api's generated ones.
func mergeProxyConfig(base *meshapi.ProxyConfig, layer protoreflect.Message) error {
	orig := base.GetProxyMetadata()
	dst, err := meshapi.ToDynamicOf(base, layer.Descriptor())
	if err != nil {
		return err
	}
	mergeMessage(dst, layer)
	merged := &meshapi.ProxyConfig{}
	if err := meshapi.FromDynamic(dst, merged); err != nil {
		return err
	}
	if fd := layer.Descriptor().Fields().ByName("proxy_metadata"); len(orig) > 0 && fd != nil && layer.Has(fd) {
		md := make(map[string]string, len(orig)+len(merged.ProxyMetadata))
		for k, v := range orig {
			md[k] = v
		}
		for k, v := range merged.ProxyMetadata { // the layer's, which replaced base's whole
			md[k] = v
		}
		merged.ProxyMetadata = md
	}
	*base = *merged
	return nil
}

func mergeMessage(dst, src protoreflect.Message) {
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() &&
			!isWellKnown(fd.Message()) && dst.Has(fd) {
			mergeMessage(dst.Mutable(fd).Message(), v.Message())
			return true
		}
		// Setting one member of a oneof clears the others, as in the JSON decoder.
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if cur := dst.WhichOneof(od); cur != nil && cur != fd {
				dst.Clear(cur)
			}
		}
		dst.Set(fd, cloneValue(fd, v))
		return true
	})
}

func cloneValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
		return protoreflect.ValueOfMessage(proto.Clone(v.Message().Interface()).ProtoReflect())
	}
	return v // lists and maps come from a layer parsed just for this merge; it is not reused
}

func isWellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}
