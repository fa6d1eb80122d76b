package capture

import (
	"strings"
	"testing"
)

// TestNftNamesAreIstios checks the table and chain names of the native nftables script against
// Istio's tools/istio-nftables/pkg/constants/constants.go: IstioProxyNatTable "istio-proxy-nat",
// IstioProxyMangleTable "istio-proxy-mangle", PreroutingChain "prerouting", OutputChain
// "output", IstioInboundChain "istio-inbound", IstioOutputChain "istio-output",
// IstioRedirectChain "istio-redirect", IstioInRedirectChain "istio-in-redirect",
// IstioDivertChain "istio-divert", IstioTproxyChain "istio-tproxy".
func TestNftNamesAreIstios(t *testing.T) {
	redirect := Defaults()
	redirect.ProxyUIDs, redirect.ProxyGIDs = []string{"1337"}, []string{"1337"}
	redirect.InboundPorts = Ports{All: true}
	tproxy := redirect
	tproxy.Mode = TProxy
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"redirect", redirect, []string{
			"add table inet istio-proxy-nat\n",
			"add chain inet istio-proxy-nat prerouting { type nat hook prerouting",
			"add chain inet istio-proxy-nat output { type nat hook output",
			"add chain inet istio-proxy-nat istio-inbound\n",
			"add chain inet istio-proxy-nat istio-output\n",
			"add chain inet istio-proxy-nat istio-redirect\n",
			"add chain inet istio-proxy-nat istio-in-redirect\n",
			"jump istio-inbound\n",
			"jump istio-output\n",
		}},
		{"tproxy", tproxy, []string{
			"add table inet istio-proxy-mangle\n",
			"add chain inet istio-proxy-mangle prerouting { type filter hook prerouting",
			"add chain inet istio-proxy-mangle istio-divert\n",
			"add chain inet istio-proxy-mangle istio-tproxy\n",
			"jump istio-divert\n",
		}},
	} {
		s := NftScript(&tc.cfg)
		for _, w := range tc.want {
			if !strings.Contains(s, w) {
				t.Errorf("%s: script lacks %q:\n%s", tc.name, w, s)
			}
		}
		if strings.Contains(s, "ISTIO") || strings.Contains(s, "PREROUTING") {
			t.Errorf("%s: upper-case name left in the script:\n%s", tc.name, s)
		}
	}
}
