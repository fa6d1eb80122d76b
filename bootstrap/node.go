package bootstrap

import (
	"strings"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

const canonicalNameLabel = "service.istio.io/canonical-name"

// serviceCluster is Istio's getServiceCluster: an explicit serviceCluster other than the default
// wins; otherwise the tracingServiceName mode picks app label / canonical name, then the workload
// name, then istio-proxy, qualified by namespace.
// From 1.30 the app name falls back to app.kubernetes.io/name, then
// service.istio.io/canonical-name (labels.GetApp; 1.28.10 and 1.29.6 read "app" only).
func serviceCluster(pc *meshapi.ProxyConfig, m *Metadata, ns string, rel Release) string {
	if sc, ok := pc.GetClusterName().(*meshapi.ProxyConfig_ServiceCluster); ok && sc.ServiceCluster != "istio-proxy" && sc.ServiceCluster != "" {
		return sc.ServiceCluster
	}
	name := m.Labels["app"]
	if _, ok := m.Labels["app"]; !ok && rel.appFallbacks() {
		for _, k := range []string{"app.kubernetes.io/name", canonicalNameLabel} {
			if v, ok := m.Labels[k]; ok {
				name = v
				break
			}
		}
	}
	switch pc.GetTracingServiceName() {
	case meshapi.ProxyConfig_CANONICAL_NAME_ONLY:
		if c := m.Labels[canonicalNameLabel]; c != "" {
			return c
		}
	case meshapi.ProxyConfig_CANONICAL_NAME_AND_NAMESPACE:
		if c := m.Labels[canonicalNameLabel]; c != "" {
			name = c
		}
	}
	if name == "" {
		name = m.WorkloadName
	}
	if name == "" {
		name = "istio-proxy"
	}
	return name + "." + ns
}

// locality from the istio-locality label (already normalised to slashes), else the platform's,
// as Istio's GetNodeMetaData.
func locality(labels map[string]string, platform string) *Locality {
	loc := labels[localityLabel]
	if loc == "" {
		loc = platform
	}
	parts := strings.SplitN(loc, "/", 3)
	l := &Locality{}
	if len(parts) > 0 {
		l.Region = parts[0]
	}
	if len(parts) > 1 {
		l.Zone = parts[1]
	}
	if len(parts) > 2 {
		l.SubZone = parts[2]
	}
	return l
}
