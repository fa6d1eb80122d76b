package istiod

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// fipsSuites are the TLS 1.2 suites FIPS 140 allows (ECDHE with AES-GCM), by Go's ID and by the
// OpenSSL name Envoy's google_grpc takes, in Istio's order.
var fipsSuites = []struct {
	id   uint16
	name string
}{
	{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "ECDHE-ECDSA-AES128-GCM-SHA256"},
	{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "ECDHE-RSA-AES128-GCM-SHA256"},
	{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, "ECDHE-ECDSA-AES256-GCM-SHA384"},
	{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, "ECDHE-RSA-AES256-GCM-SHA384"},
}

func fipsSuiteIDs() []uint16 {
	ids := make([]uint16, len(fipsSuites))
	for i, s := range fipsSuites {
		ids[i] = s.id
	}
	return ids
}

func fipsSuiteNames() string {
	names := make([]string, len(fipsSuites))
	for i, s := range fipsSuites {
		names[i] = s.name
	}
	return strings.Join(names, ":")
}

// Compliance is what one COMPLIANCE_POLICY asks of the agent's own Go TLS and of Envoy, the
// one place the policies are spelled out.
type Compliance struct {
	// EnvoyCipherSuites is the GRPC_SSL_CIPHER_SUITES Istio's agent gives Envoy for its
	// google_grpc clients (pkg/envoy/proxy.go, Run); empty: none is set.
	EnvoyCipherSuites string
	// GoogleGRPCTLS12Only is Istio's bootstrap runtime flag
	// envoy.reloadable_features.google_grpc_disable_tls_13 (pkg/bootstrap, extractRuntimeFlags).
	GoogleGRPCTLS12Only bool
	// apply restricts the agent's own TLS (nil: no restriction).
	apply func(*tls.Config)
}

// compliancePolicies are the COMPLIANCE_POLICY names, in Istio's order, with what each asks:
// the one place they are spelled (the agent's environment parser and help take them from here).
// Each is a function so that package init builds none of them.
var compliancePolicies = []struct {
	name string
	ask  func() Compliance
}{
	{"fips-140-2", func() Compliance {
		return Compliance{EnvoyCipherSuites: fipsSuiteNames(), GoogleGRPCTLS12Only: true, apply: func(c *tls.Config) {
			c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
			c.CipherSuites = fipsSuiteIDs()
			c.CurvePreferences = []tls.CurveID{tls.CurveP256}
		}}
	}},
	{"fips-140-3", func() Compliance {
		return Compliance{EnvoyCipherSuites: "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256", apply: func(c *tls.Config) {
			c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS13
			c.CipherSuites = fipsSuiteIDs()
			c.CurvePreferences = []tls.CurveID{tls.CurveP256, tls.CurveP384}
		}}
	}},
	{"pqc", func() Compliance {
		return Compliance{apply: func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS13
			c.CipherSuites = []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384}
			c.CurvePreferences = []tls.CurveID{tls.X25519MLKEM768}
		}}
	}},
}

// CompliancePolicies returns the COMPLIANCE_POLICY names CompliancePolicy knows, in Istio's order.
func CompliancePolicies() []string {
	names := make([]string, len(compliancePolicies))
	for i, p := range compliancePolicies {
		names[i] = p.name
	}
	return names
}

// CompliancePolicy returns what COMPLIANCE_POLICY policy asks; "" is no policy, and an unknown
// name is an error naming it.
func CompliancePolicy(policy string) (Compliance, error) {
	if policy == "" {
		return Compliance{}, nil
	}
	for _, p := range compliancePolicies {
		if p.name == policy {
			return p.ask(), nil
		}
	}
	return Compliance{}, fmt.Errorf("istiod: unknown compliance policy %q (want one of %s)", policy, strings.Join(CompliancePolicies(), ", "))
}

// applyCompliance restricts c as Istio's agent restricts its own Go TLS for COMPLIANCE_POLICY
// (pilot/pkg/security/model, EnforceGoCompliance), last, over every other setting:
//   - fips-140-2: TLS 1.2 only, the four ECDHE AES-GCM suites, P-256;
//   - fips-140-3: TLS 1.2 to 1.3, those suites for 1.2, P-256 or P-384 (TLS 1.3's suites are
//     restricted by Go itself under GODEBUG=fips140=only);
//   - pqc: TLS 1.3 only with the AES-GCM suites and the X25519MLKEM768 hybrid key exchange.
func applyCompliance(c *tls.Config, policy string) error {
	p, err := CompliancePolicy(policy)
	if err != nil {
		return err
	}
	if p.apply != nil {
		p.apply(c)
	}
	return nil
}
