package envoyproto

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// references checks the names Envoy resolves at start against the static clusters.
func references(top map[string]any) []Finding {
	var out []Finding
	static := map[string]string{} // name -> path of first definition
	sr, _ := top["static_resources"].(map[string]any)
	if sr == nil {
		sr, _ = top["staticResources"].(map[string]any)
	}
	clusters, _ := sr["clusters"].([]any)
	for i, c := range clusters {
		cm, _ := c.(map[string]any)
		name, _ := cm["name"].(string)
		p := "static_resources.clusters[" + strconv.Itoa(i) + "].name"
		if prev, dup := static[name]; dup {
			out = append(out, Finding{Path: p, Message: fmt.Sprintf("duplicate static cluster %q (first at %s)", name, prev)})
			continue
		}
		static[name] = p
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				p := join(path, k)
				switch k {
				case "envoy_grpc", "envoyGrpc":
					if m, ok := e.(map[string]any); ok {
						name, _ := m["cluster_name"].(string)
						if name == "" {
							name, _ = m["clusterName"].(string)
						}
						if _, ok := static[name]; !ok {
							out = append(out, Finding{Path: join(p, "cluster_name"), Message: fmt.Sprintf("Unknown gRPC client cluster %q: not a static cluster, Envoy exits at start", name)})
						}
					}
				case "local_cluster_name", "localClusterName":
					// Envoy: "local cluster '...' must be defined" (cluster_manager_impl.cc).
					if name, ok := e.(string); ok && name != "" {
						if _, ok := static[name]; !ok {
							out = append(out, Finding{Path: p, Message: fmt.Sprintf("local cluster %q must be defined as a static cluster, Envoy exits at start", name)})
						}
					}
				case "route":
					// A static listener's inline route names a cluster that only static_resources can
					// hold at start; the metrics and health listeners route to prometheus_stats/agent.
					if m, ok := e.(map[string]any); ok && (strings.HasPrefix(path, "static_resources.listeners") || strings.HasPrefix(path, "staticResources.listeners")) {
						if name, ok := m["cluster"].(string); ok {
							if _, ok := static[name]; !ok {
								out = append(out, Finding{Path: join(p, "cluster"), Message: fmt.Sprintf("route to cluster %q, which is not a static cluster: the listener answers 503", name)})
							}
						}
					}
				case "socket_address", "socketAddress":
					// Envoy's statsd sink takes an IP only.
					if m, ok := e.(map[string]any); ok && (strings.HasPrefix(path, "stats_sinks") || strings.HasPrefix(path, "statsSinks")) {
						if a, _ := m["address"].(string); a != "" {
							if _, err := netip.ParseAddr(a); err != nil {
								out = append(out, Finding{Path: join(p, "address"), Message: fmt.Sprintf("stats sink address %q is not an IP: Envoy does not resolve it", a)})
							}
						}
					}
				case "collector_cluster", "collectorCluster":
					if name, ok := e.(string); ok {
						if _, ok := static[name]; !ok {
							out = append(out, Finding{Path: p, Message: fmt.Sprintf("tracer collector cluster %q is not a static cluster", name)})
						}
					}
				}
				walk(p, e)
			}
		case []any:
			for i, e := range t {
				walk(path+"["+strconv.Itoa(i)+"]", e)
			}
		}
	}
	for _, k := range []string{"dynamic_resources", "dynamicResources", "static_resources", "staticResources", "tracing", "stats_sinks", "statsSinks", "cluster_manager", "clusterManager"} {
		if v, ok := top[k]; ok {
			walk(k, v)
		}
	}
	return out
}
