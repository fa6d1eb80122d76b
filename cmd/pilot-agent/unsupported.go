package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// unsupported refuses, before anything starts, the settings Istio's agent acts on and Wingman
// does not yet (docs/compat.md rows marked "refused"): a setting that parses and does nothing
// would let the user believe it took effect. Values Istio's injector sets by default are never
// refused.
func unsupported(env *options.Env, pc *meshapi.ProxyConfig) error {
	var errs []error
	refuse := func(setting, why string) {
		errs = append(errs, fmt.Errorf("%s is not supported yet: %s", setting, why))
	}
	switch {
	case env.CAProvider == "GoogleCA":
		refuse("CA_PROVIDER=GoogleCA", "no Google CA client (Istio's open-source agent has none registered either)")
	case env.CAProvider == "Citadel" && strings.Contains(env.CAAddr, "googleapis.com"):
		// Istio's agent switches to the GoogleCA provider for such an address.
		refuse("CA_ADDR="+env.CAAddr, "a googleapis.com CA selects the GoogleCA provider, which has no client "+
			"(Istio's open-source agent has none registered either)")
	case env.CAProvider == "GkeWorkloadCertificate":
		refuse("CA_PROVIDER=GkeWorkloadCertificate", "GKE workload certificates are not read")
	}
	if pc.GetPrivateKeyProvider() != nil {
		refuse("ProxyConfig field privateKeyProvider", "the SDS server does not hand Envoy a private key provider")
	}
	return errors.Join(errs...)
}

// tlsClientSetting reads an ISTIO_META_TLS_CLIENT_* value from the environment or, as Istio's
// agent reads it, from ProxyConfig.proxyMetadata.
func tlsClientSetting(env *options.Env, pc *meshapi.ProxyConfig, name string) string {
	if v := pc.GetProxyMetadata()[name]; v != "" {
		return v
	}
	switch name {
	case "ISTIO_META_TLS_CLIENT_KEY":
		return env.TLSClientKey
	case "ISTIO_META_TLS_CLIENT_CERT_CHAIN":
		return env.TLSClientCertChain
	}
	return ""
}
