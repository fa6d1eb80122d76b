package main

import (
	"github.com/wingman-mesh/wingman/certs"
	"github.com/wingman-mesh/wingman/mux"
)

// pcdsHandler consumes the agent's ProxyConfig subscription (PROXY_CONFIG_XDS_AGENT=true), as
// Istio's agent does: each ProxyConfig resource's ca_certificates_pem becomes the trust bundle
// merged into ROOTCA. Only that field is read from the wire. A response without resources
// changes nothing; a resource that cannot be read, or a bundle without a certificate, is NACKed.
func pcdsHandler(m *certs.Manager) mux.Handler {
	return func(res [][]byte) error {
		for _, r := range res {
			bundle, err := certs.TrustBundleFromProxyConfig(r)
			if err != nil {
				return err
			}
			if err := m.UpdateTrustBundle(bundle); err != nil {
				return err
			}
		}
		return nil
	}
}
