// Package meshlab is a local control plane for development, demos, tests and the performance
// harness: it stands in for Istiod on one machine.
//
// One gRPC port serves, through lab/controlplane (the one Istiod stand-in), behind TLS and a
// bearer-token check, both go-control-plane's xDS server (state-of-the-world and Delta ADS) and
// an Istio-compatible CA (istio.v1.auth.IstioCertificateService, from lab/testca), as Istiod
// serves both on 15012. The xDS resources (Envoy's Listener, RouteConfiguration, Cluster,
// ClusterLoadAssignment, Secret, TypedExtensionConfig, and Istio's NameTable and ProxyConfig)
// come from a folder of YAML or JSON files, reloaded when a file changes. A file that does not
// decode is rejected with its name and the field at fault, and the last good set keeps being
// served. meshlab writes the root certificate and the token where an agent started in the same
// root directory reads them (./var/run/secrets/istio/root-cert.pem and
// ./var/run/secrets/tokens/istio-token).
package meshlab
