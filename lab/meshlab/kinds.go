package meshlab

import (
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tls "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	meshv1 "istio.io/api/mesh/v1alpha1"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/ndspb"

	// Registered so that typed_config and other Any fields of these types decode by "@type".
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// kind is one resource type meshlab serves. Immutable.
type kind struct {
	name      string // the value of a document's "kind" field
	typeURL   string
	nameField protoreflect.Name // the field holding the resource name; "" for singletons
	newMsg    func() protoreflect.Message
}

// kinds are the resource types meshlab serves, in the order their counts are logged.
var kinds = []kind{
	{"Listener", fastpath.ListenerType, "name", func() protoreflect.Message { return (&listener.Listener{}).ProtoReflect() }},
	{"RouteConfiguration", fastpath.RouteType, "name", func() protoreflect.Message { return (&route.RouteConfiguration{}).ProtoReflect() }},
	{"Cluster", fastpath.ClusterType, "name", func() protoreflect.Message { return (&cluster.Cluster{}).ProtoReflect() }},
	{"ClusterLoadAssignment", fastpath.EndpointType, "cluster_name", func() protoreflect.Message { return (&endpoint.ClusterLoadAssignment{}).ProtoReflect() }},
	{"Secret", fastpath.SecretType, "name", func() protoreflect.Message { return (&tls.Secret{}).ProtoReflect() }},
	{"ExtensionConfig", fastpath.ExtensionConfigType, "name", func() protoreflect.Message { return (&core.TypedExtensionConfig{}).ProtoReflect() }},
	{"NameTable", fastpath.NameTableType, "", func() protoreflect.Message { return (&ndspb.NameTable{}).ProtoReflect() }},
	{"ProxyConfig", fastpath.ProxyConfigType, "", func() protoreflect.Message { return (&meshv1.ProxyConfig{}).ProtoReflect() }},
}

// kindByName finds a kind by its "kind" value (case-insensitive is not offered: names are
// exact, as Kubernetes kinds are).
func kindByName(s string) (kind, bool) {
	for _, k := range kinds {
		if k.name == s {
			return k, true
		}
	}
	return kind{}, false
}

func kindByTypeURL(s string) (kind, bool) {
	for _, k := range kinds {
		if k.typeURL == s {
			return k, true
		}
	}
	return kind{}, false
}

// kindNames lists the accepted "kind" values, for error messages.
func kindNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.name
	}
	return out
}
