package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
)

// caCRLPath is where Istio's injector mounts the plugged-in CA's CRL (Istio's
// security.CACRLFilePath, read by its SDS server when PILOT_ENABLE_CA_CRL is true).
const caCRLPath = "/var/run/secrets/istio/crl/ca-crl.pem"

// unsupported refuses, before anything starts, the settings Istio's agent acts on and Wingman
// does not yet (docs/compat.md rows marked "refused"): a setting that parses and does nothing
// would let the user believe it took effect. Values Istio's injector sets by default are never
// refused. templateFile is --templateFile; crlPath is caCRLPath outside tests.
func unsupported(env *options.Env, pc *meshv1alpha1.ProxyConfig, templateFile, crlPath string) error {
	var errs []error
	refuse := func(setting, why string) {
		errs = append(errs, fmt.Errorf("%s is not supported yet: %s", setting, why))
	}
	if env.ProxyConfigXDSAgent {
		refuse("PROXY_CONFIG_XDS_AGENT=true", "the agent does not subscribe to ProxyConfig over xDS (PCDS trust bundles); unset it")
	}
	if env.EnableCACRL {
		if _, err := os.Stat(crlPath); err == nil {
			refuse("PILOT_ENABLE_CA_CRL=true with "+crlPath+" present",
				"the CA's CRL is not served in the ROOTCA secret; set PILOT_ENABLE_CA_CRL=false")
		}
	}
	if env.CompliancePolicy != "" {
		refuse("COMPLIANCE_POLICY="+env.CompliancePolicy, "the agent's own TLS to istiod and the CA does not apply the policy; unset it")
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
	if env.FileMountedCerts {
		for _, name := range []string{"ISTIO_META_TLS_CLIENT_KEY", "ISTIO_META_TLS_CLIENT_CERT_CHAIN"} {
			if tlsClientSetting(env, pc, name) != "" {
				refuse(name+" with FILE_MOUNTED_CERTS=true", "the xDS connection does not present the mounted client certificate")
			}
		}
	}
	if pc.GetReadinessProbe() != nil {
		refuse("ProxyConfig field readinessProbe", "the agent does not probe the application or report its health to istiod")
	}
	if pc.GetPrivateKeyProvider() != nil {
		refuse("ProxyConfig field privateKeyProvider", "the SDS server does not hand Envoy a private key provider")
	}
	if pc.GetEnvoyAccessLogService().GetAddress() != "" && env.BootstrapTemplate == "" && templateFile == "" {
		refuse("ProxyConfig field envoyAccessLogService", "the built-in bootstrap has no envoy_accesslog_service cluster (a custom ISTIO_BOOTSTRAP template can render one)")
	}
	return errors.Join(errs...)
}

// tlsClientSetting reads an ISTIO_META_TLS_CLIENT_* value from the environment or, as Istio's
// agent reads it, from ProxyConfig.proxyMetadata.
func tlsClientSetting(env *options.Env, pc *meshv1alpha1.ProxyConfig, name string) string {
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
