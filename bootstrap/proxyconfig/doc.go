// Package proxyconfig builds the agent's effective ProxyConfig the way Istio's pilot-agent does:
// built-in defaults, then the mesh config file's defaultConfig, then the PROXY_CONFIG variable, then
// the pod's proxy.istio.io/config annotation, then the two single-field annotations
// (sidecar.istio.io/discoveryAddress, status.sidecar.istio.io/port).
//
// Every error names its source (a file path, PROXY_CONFIG, or an annotation) and, where the input
// parsed, the offending field. The package reads the files it is given and nothing else: it never
// looks at the environment.
package proxyconfig
