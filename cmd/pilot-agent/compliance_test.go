package main

import "testing"

// TestCompliancePolicyForEnvoy: what Envoy gets per COMPLIANCE_POLICY, as Istio's agent gives it
// (pkg/envoy/proxy.go Run: GRPC_SSL_CIPHER_SUITES; pkg/bootstrap extractRuntimeFlags: the
// google_grpc TLS 1.3 switch for fips-140-2 only).
func TestCompliancePolicyForEnvoy(t *testing.T) {
	for _, tc := range []struct {
		policy, suites string
		tls12Only      bool
	}{
		{"", "", false},
		{"fips-140-2", "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384", true},
		{"fips-140-3", "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256", false},
		{"pqc", "", false},
	} {
		if got := envoyCipherSuites(tc.policy); got != tc.suites {
			t.Errorf("%q: GRPC_SSL_CIPHER_SUITES %q, want %q", tc.policy, got, tc.suites)
		}
		if got := fipsPolicy(tc.policy); got != tc.tls12Only {
			t.Errorf("%q: google_grpc_disable_tls_13 %v, want %v", tc.policy, got, tc.tls12Only)
		}
	}
}
