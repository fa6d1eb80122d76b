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

// TestIsPlaintext: Istio's agent talks plaintext to Istiod's port 15010 only, unless the auth
// policy is NONE.
func TestIsPlaintext(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want bool
	}{
		{Config{Address: "istiod.istio-system.svc:15010"}, true},
		{Config{Address: "istiod.istio-system.svc:15012"}, false},
		{Config{Address: "istiod.istio-system.svc:15012", Plaintext: true}, true},
		{Config{Address: "10.0.0.1:150100"}, false},
	} {
		if got := tc.cfg.IsPlaintext(); got != tc.want {
			t.Errorf("%+v: IsPlaintext %v, want %v", tc.cfg, got, tc.want)
		}
	}
}
