package envoyproto

import (
	"fmt"
	"strconv"
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
