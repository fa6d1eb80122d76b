package istiod

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
)

// negotiate handshakes a client with COMPLIANCE_POLICY policy against a server configured by
// server, returning what the client negotiated.
func negotiate(t *testing.T, policy string, server *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	rootPEM, serving := pki(t, "istiod.istio-system.svc")
	root := filepath.Join(t.TempDir(), "root.pem")
	writeFile(t, root, rootPEM)
	creds, err := TLSConfig(Config{Address: "x:15012", RootCAFile: root, ServerName: "istiod.istio-system.svc", CompliancePolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	server.Certificates = []tls.Certificate{serving}
	return handshakeWith(t, creds, server)
}

// TestCompliancePolicy: the agent's own TLS to Istiod and the CA follows COMPLIANCE_POLICY as
// Istio's EnforceGoCompliance sets it (values from pilot/pkg/security/model).
func TestCompliancePolicy(t *testing.T) {
	// No policy: TLS 1.3 with whatever the server prefers.
	if st, err := negotiate(t, "", &tls.Config{}); err != nil || st.Version != tls.VersionTLS13 {
		t.Fatalf("no policy: %v, version %x", err, st.Version)
	}
	// fips-140-2: TLS 1.2 with a FIPS suite, even against a server offering 1.3.
	st, err := negotiate(t, "fips-140-2", &tls.Config{})
	if err != nil || st.Version != tls.VersionTLS12 || st.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 && st.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Fatalf("fips-140-2: %v, version %x suite %x", err, st.Version, st.CipherSuite)
	}
	// fips-140-2 refuses a server that only speaks a non-FIPS suite or only X25519.
	if _, err := negotiate(t, "fips-140-2", &tls.Config{MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}); err == nil {
		t.Fatal("fips-140-2 accepted ChaCha20")
	}
	if _, err := negotiate(t, "fips-140-2", &tls.Config{CurvePreferences: []tls.CurveID{tls.X25519}}); err == nil {
		t.Fatal("fips-140-2 accepted X25519")
	}
	// fips-140-3: TLS 1.3 allowed, P-256/P-384 only.
	if st, err := negotiate(t, "fips-140-3", &tls.Config{}); err != nil || st.Version != tls.VersionTLS13 {
		t.Fatalf("fips-140-3: %v, version %x", err, st.Version)
	}
	if _, err := negotiate(t, "fips-140-3", &tls.Config{CurvePreferences: []tls.CurveID{tls.X25519}}); err == nil {
		t.Fatal("fips-140-3 accepted X25519")
	}
	// pqc: TLS 1.3 with the hybrid X25519MLKEM768 only.
	if st, err := negotiate(t, "pqc", &tls.Config{}); err != nil || st.Version != tls.VersionTLS13 || st.CurveID != tls.X25519MLKEM768 {
		t.Fatalf("pqc: %v, version %x curve %v", err, st.Version, st.CurveID)
	}
	if _, err := negotiate(t, "pqc", &tls.Config{MaxVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("pqc accepted TLS 1.2")
	}
	if _, err := negotiate(t, "pqc", &tls.Config{CurvePreferences: []tls.CurveID{tls.X25519}}); err == nil {
		t.Fatal("pqc accepted classical X25519")
	}
	if _, err := TLSConfig(Config{CompliancePolicy: "fips-9000", RootCAFile: ""}); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

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
		c, err := CompliancePolicy(tc.policy)
		if err != nil {
			t.Fatalf("%q: %v", tc.policy, err)
		}
		if c.EnvoyCipherSuites != tc.suites {
			t.Errorf("%q: GRPC_SSL_CIPHER_SUITES %q, want %q", tc.policy, c.EnvoyCipherSuites, tc.suites)
		}
		if c.GoogleGRPCTLS12Only != tc.tls12Only {
			t.Errorf("%q: google_grpc_disable_tls_13 %v, want %v", tc.policy, c.GoogleGRPCTLS12Only, tc.tls12Only)
		}
	}
	if _, err := CompliancePolicy("fips-9000"); err == nil || !strings.Contains(err.Error(), "fips-9000") {
		t.Errorf("unknown policy: %v, want an error naming it", err)
	}
}
