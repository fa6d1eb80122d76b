package istiod

import "testing"

// Expected names follow Istio's agent (pkg/istio-agent: the CA and discovery server name is
// ISTIOD_SAN, else the address's host, with localhost meaning istiod.istio-system.svc).
func TestServerName(t *testing.T) {
	for addr, want := range map[[2]string]string{
		{"localhost:15012", ""}:                  "istiod.istio-system.svc",
		{"istiod.istio-system.svc:15012", ""}:    "istiod.istio-system.svc",
		{"istiod-remote.example.com:15012", ""}:  "istiod-remote.example.com",
		{"localhost:15012", "istiod.custom.svc"}: "istiod.custom.svc",
		{"localhost.localdomain:15012", ""}:      "istiod.istio-system.svc",
		{"no-port", ""}:                          "no-port",
	} {
		if got := ServerName(addr[0], addr[1]); got != want {
			t.Errorf("ServerName(%q, %q) = %q, want %q", addr[0], addr[1], got, want)
		}
	}
}

// TestCAPlaintext: Istio's CA client talks plaintext to Istiod's port 15010 only
// (pkg/istio-agent createCitadel); the xDS upstream only with controlPlaneAuthPolicy NONE, which
// the caller says with Config.Plaintext.
func TestCAPlaintext(t *testing.T) {
	for addr, want := range map[string]bool{
		"istiod.istio-system.svc:15010": true,
		"istiod.istio-system.svc:15012": false,
		"10.0.0.1:150100":               false,
	} {
		if got := CAPlaintext(addr); got != want {
			t.Errorf("CAPlaintext(%q) = %v, want %v", addr, got, want)
		}
	}
	if (&Config{Address: "istiod.istio-system.svc:15010"}).IsPlaintext() {
		t.Error("an xDS address on :15010 is plaintext without controlPlaneAuthPolicy NONE")
	}
}
