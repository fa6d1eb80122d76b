package bootstrap

import (
	"strings"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

const canonicalNameLabel = "service.istio.io/canonical-name"

// serviceCluster is Istio's getServiceCluster (pkg/bootstrap/config.go, every supported tag): an
// explicit serviceCluster other than istio-proxy wins; a tracingServiceName of
// CANONICAL_NAME_ONLY gives the canonical name (labels service.istio.io/canonical-name,
// app.kubernetes.io/name, app, else the workload name or istio-proxy: labels.CanonicalService),
// CANONICAL_NAME_AND_NAMESPACE that name and the namespace; everything else falls to
// serviceClusterOrDefault: the app label and the namespace, else the workload name and the
// namespace, else istio-proxy.<namespace>. From 1.30 the app name also comes from
// app.kubernetes.io/name, then service.istio.io/canonical-name (labels.GetApp; 1.28.10 and
// 1.29.6 read "app" only). A label counts when present, even empty, as Istio's map lookups do.
func serviceCluster(pc *meshapi.ProxyConfig, m *Metadata, ns string, rel Release) string {
	orDefault := func(name string) string {
		if name != "" && name != "istio-proxy" {
			return name
		}
		appLabels := []string{"app"}
		if rel.appFallbacks() {
			appLabels = []string{"app", "app.kubernetes.io/name", canonicalNameLabel}
		}
		if app, ok := firstLabel(m.Labels, appLabels...); ok {
			return app + "." + ns
		}
		if m.WorkloadName != "" {
			return m.WorkloadName + "." + ns
		}
		if ns != "" {
			return "istio-proxy." + ns
		}
		return "istio-proxy"
	}
	canonical := func() string {
		if c, ok := firstLabel(m.Labels, canonicalNameLabel, "app.kubernetes.io/name", "app"); ok {
			return c
		}
		if m.WorkloadName != "" {
			return m.WorkloadName
		}
		return "istio-proxy"
	}
	switch cn := pc.GetClusterName().(type) {
	case *meshapi.ProxyConfig_ServiceCluster:
		return orDefault(cn.ServiceCluster)
	case *meshapi.ProxyConfig_TracingServiceName_:
		switch cn.TracingServiceName {
		case meshapi.ProxyConfig_CANONICAL_NAME_ONLY:
			return orDefault(canonical())
		case meshapi.ProxyConfig_CANONICAL_NAME_AND_NAMESPACE:
			if ns != "" {
				return canonical() + "." + ns
			}
			return orDefault(canonical())
		}
	}
	return orDefault("istio-proxy")
}

// firstLabel is the value of the first of keys present in labels (labels.lookupLabelValue).
func firstLabel(labels map[string]string, keys ...string) (string, bool) {
	for _, k := range keys {
		if v, ok := labels[k]; ok {
			return v, true
		}
	}
	return "", false
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
