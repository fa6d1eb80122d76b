package istiod

import (
	"crypto/tls"
	"fmt"
)

// fipsCipherSuites are the TLS 1.2 suites FIPS 140 allows (ECDHE with AES-GCM).
var fipsCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
}

// applyCompliance restricts c as Istio's agent restricts its own Go TLS for COMPLIANCE_POLICY
// (pilot/pkg/security/model, EnforceGoCompliance), last, over every other setting:
//   - fips-140-2: TLS 1.2 only, the four ECDHE AES-GCM suites, P-256;
//   - fips-140-3: TLS 1.2 to 1.3, those suites for 1.2, P-256 or P-384 (TLS 1.3's suites are
//     restricted by Go itself under GODEBUG=fips140=only);
//   - pqc: TLS 1.3 only with the AES-GCM suites and the X25519MLKEM768 hybrid key exchange.
func applyCompliance(c *tls.Config, policy string) error {
	switch policy {
	case "":
	case "fips-140-2":
		c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		c.CipherSuites = fipsCipherSuites
		c.CurvePreferences = []tls.CurveID{tls.CurveP256}
	case "fips-140-3":
		c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS13
		c.CipherSuites = fipsCipherSuites
		c.CurvePreferences = []tls.CurveID{tls.CurveP256, tls.CurveP384}
	case "pqc":
		c.MinVersion = tls.VersionTLS13
		c.CipherSuites = []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384}
		c.CurvePreferences = []tls.CurveID{tls.X25519MLKEM768}
	default:
		return fmt.Errorf("istiod: unknown compliance policy %q", policy)
	}
	return nil
}
