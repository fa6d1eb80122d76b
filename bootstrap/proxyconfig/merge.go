package proxyconfig

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// mergeProxyConfig lays layer (a parsed ProxyConfig document, or a mesh file's defaultConfig)
// over base as Istio's MergeProxyConfig does (pkg/config/mesh/mesh.go, identical 1.28.10 ..
// master). It applies the document with protomarshal.ApplyYAML, i.e. github.com/golang/protobuf
// v1.5.4's jsonpb.Unmarshaler onto the existing message (every tag's go.mod): decode.go's
// unmarshalMessage sets each field the document has from a new value (m.NewField, then m.Set),
// so a field the layer sets replaces base's whole, nested messages included ("tracing:
// {sampling: 7}" drops a zipkin address set below it; seen side by side, bootstrap/SIDE_BY_SIDE.md);
// fields it does not set stay. Then proxyMetadata is merged key by key (mergeMap) and
// proxyHeaders' forwardedClientCert, requestId, attemptCount, server and envoyDebugHeaders are
// taken from base where the layer's proxyHeaders leaves them unset (correctProxyHeaders). The
// merge runs on dynamic messages (meshapi's descriptors), as it ran on istio.io/api's generated ones.
func mergeProxyConfig(base *meshapi.ProxyConfig, layer protoreflect.Message) error {
	orig, origHeaders := base.GetProxyMetadata(), base.GetProxyHeaders()
	dst, err := meshapi.ToDynamicOf(base, layer.Descriptor())
	if err != nil {
		return err
	}
	setFields(dst, layer)
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
	correctProxyHeaders(merged.GetProxyHeaders(), origHeaders)
	*base = *merged
	return nil
}

// correctProxyHeaders is Istio's correctProxyHeaders (mesh.go): where both the merged and the
// previous proxyHeaders exist, five of the merged one's fields left unset keep the previous value.
func correctProxyHeaders(ph, orig *meshapi.ProxyConfig_ProxyHeaders) {
	if ph == nil || orig == nil {
		return
	}
	if ph.ForwardedClientCert == 0 {
		ph.ForwardedClientCert = orig.ForwardedClientCert
	}
	if ph.RequestId == nil {
		ph.RequestId = orig.RequestId
	}
	if ph.AttemptCount == nil {
		ph.AttemptCount = orig.AttemptCount
	}
	if ph.Server == nil {
		ph.Server = orig.Server
	}
	if ph.EnvoyDebugHeaders == nil {
		ph.EnvoyDebugHeaders = orig.EnvoyDebugHeaders
	}
}

// setFields sets every field src has on dst, replacing dst's whole.
func setFields(dst, src protoreflect.Message) {
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
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
