package istiod

import "crypto/tls"

// tlsConfig is TLS 1.2+ verified against the roots, re-read when they change (a root rotation
// takes effect at the next handshake), for cfg's server name, with cfg's client certificate and
// COMPLIANCE_POLICY applied. It fails at once when the roots cannot be read.
func tlsConfig(cfg *Config) (*tls.Config, error) {
	roots := &rootPool{file: cfg.RootCAFile}
	if _, err := roots.get(); err != nil {
		return nil, err
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: cfg.ServerName,
		// Verification is done in VerifyConnection against the current roots.
		InsecureSkipVerify:   true,
		VerifyConnection:     roots.verify(cfg.ServerName),
		GetClientCertificate: cfg.ClientCertificate,
	}
	if err := applyCompliance(tc, cfg.CompliancePolicy); err != nil {
		return nil, err
	}
	return tc, nil
}
