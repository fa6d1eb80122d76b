package bootstrap

// Secure metrics (ENVOY_SECURE_METRICS_PORT, ENVOY_SECURE_MERGED_METRICS_PORT, Istio 1.31): a
// static listener per port that requires a client certificate signed by the mesh roots. Envoy's
// own stats go to prometheus_stats; the merged endpoint (/stats/prometheus and /metrics) goes to
// the agent's status port. The workload certificate and roots come over SDS (default, ROOTCA).

const typeDownstreamTLS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"

// sdsSecret is an SDS secret reference served by the agent on sds-grpc.
func sdsSecret(name string) map[string]any {
	return map[string]any{"name": name, "sds_config": map[string]any{
		"api_config_source": map[string]any{
			"api_type": "GRPC", "set_node_on_first_message_only": true, "transport_api_version": "V3",
			"grpc_services": []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": "sds-grpc"}}},
		},
		"resource_api_version": "V3",
	}}
}

func mutualTLSServer() *TypedExtension {
	return &TypedExtension{Name: "envoy.transport_sockets.tls", TypedConfig: map[string]any{
		"@type":                      typeDownstreamTLS,
		"require_client_certificate": true,
		"common_tls_context": map[string]any{
			"tls_certificate_sds_secret_configs": []any{sdsSecret("default")},
			"combined_validation_context": map[string]any{
				"default_validation_context":           map[string]any{},
				"validation_context_sds_secret_config": sdsSecret("ROOTCA"),
			},
		},
	}}
}

// secureMetricsListeners renders the listeners for the secure metrics ports that are set.
func (st *state) secureMetricsListeners() []Listener {
	var out []Listener
	add := func(port int, statPrefix, cluster string, prefixes ...string) {
		if port == 0 {
			return
		}
		routes := make([]Route, len(prefixes))
		for i, p := range prefixes {
			routes[i] = Route{Match: RouteMatch{Prefix: p}, Route: RouteAction{Cluster: cluster}}
		}
		// The wildcard only: the template gives these listeners no additional addresses.
		out = append(out, Listener{
			Name: listenerName(st.wildcard, uint32(port)), Address: socketAddr("TCP", st.wildcard, uint32(port)),
			// Istio's template: the TLS inspector finds the handshake and the one filter chain
			// takes TLS only.
			ListenerFilters: []TypedExtension{{Name: "envoy.filters.listener.tls_inspector", TypedConfig: map[string]string{"@type": typeTLSInspector}}},
			FilterChains: []FilterChain{{
				FilterChainMatch: &FilterChainMatch{TransportProtocol: "tls"},
				Filters:          []TypedExtension{hcmRoutes(statPrefix, routes, nil)},
				TransportSocket:  mutualTLSServer(),
			}},
			IgnoreGlobalConnLimit: true, BypassOverloadManager: true,
		})
	}
	add(st.cfg.EnvoySecureMetricsPort, "secure_stats", "prometheus_stats", "/stats/prometheus")
	add(st.cfg.EnvoySecureMergedMetricsPort, "secure_merged_stats", "agent", "/stats/prometheus", "/metrics")
	return out
}
