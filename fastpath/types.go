package fastpath

// Type URLs the proxy knows by name. Peeked type URLs equal to one of these are returned as the
// constant, so reading them allocates nothing.
const (
	TypePrefix          = "type.googleapis.com/"
	ListenerType        = TypePrefix + "envoy.config.listener.v3.Listener"
	ClusterType         = TypePrefix + "envoy.config.cluster.v3.Cluster"
	RouteType           = TypePrefix + "envoy.config.route.v3.RouteConfiguration"
	VirtualHostType     = TypePrefix + "envoy.config.route.v3.VirtualHost"
	EndpointType        = TypePrefix + "envoy.config.endpoint.v3.ClusterLoadAssignment"
	SecretType          = TypePrefix + "envoy.extensions.transport_sockets.tls.v3.Secret"
	ExtensionConfigType = TypePrefix + "envoy.config.core.v3.TypedExtensionConfig"
	RuntimeType         = TypePrefix + "envoy.service.runtime.v3.Runtime"
	ScopedRouteType     = TypePrefix + "envoy.config.route.v3.ScopedRouteConfiguration"
	NameTableType       = TypePrefix + "istio.networking.nds.v1.NameTable"
	ProxyConfigType     = TypePrefix + "istio.mesh.v1alpha1.ProxyConfig"
	HealthInfoType      = TypePrefix + "istio.v1.HealthInformation"
	WorkloadType        = TypePrefix + "istio.workload.Workload"
	AddressType         = TypePrefix + "istio.workload.Address"
)

var knownTypeURLs = func() map[string]string {
	m := map[string]string{}
	for _, t := range []string{ListenerType, ClusterType, RouteType, VirtualHostType, EndpointType,
		SecretType, ExtensionConfigType, RuntimeType, ScopedRouteType, NameTableType,
		ProxyConfigType, HealthInfoType, WorkloadType, AddressType} {
		m[t] = t
	}
	return m
}()
