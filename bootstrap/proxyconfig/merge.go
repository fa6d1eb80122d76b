package proxyconfig

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// mergeProxyConfig lays layer over base with the semantics Istio gets from applying a JSON document
// onto an existing message: a field the layer sets replaces base's, except that nested messages
// merge field by field; lists and maps are replaced whole; well-known types (durations, wrappers)
// are replaced whole. proxyMetadata is the one map merged key by key (Istio's mergeMap).
func mergeProxyConfig(base, layer *meshv1alpha1.ProxyConfig) {
	orig := base.GetProxyMetadata()
	mergeMessage(base.ProtoReflect(), layer.ProtoReflect())
	if len(orig) > 0 && layer.GetProxyMetadata() != nil {
		merged := make(map[string]string, len(orig)+len(layer.GetProxyMetadata()))
		for k, v := range orig {
			merged[k] = v
		}
		for k, v := range layer.GetProxyMetadata() {
			merged[k] = v
		}
		base.ProxyMetadata = merged
	}
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
