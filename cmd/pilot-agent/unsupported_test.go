package main

import (
	"strings"
	"testing"

	"github.com/wingman-mesh/wingman/bootstrap/proxyconfig"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// TestUnsupportedSettingsRefused: every setting docs/compat.md marks "refused" fails the start
// naming itself, while Istio's injector defaults and the settings Wingman implements start.
func TestUnsupportedSettingsRefused(t *testing.T) {
	pcWith := func(f func(*meshapi.ProxyConfig)) *meshapi.ProxyConfig {
		pc := proxyconfig.Default()
		f(pc)
		return pc
	}
	none := func(*meshapi.ProxyConfig) {}
	for _, tc := range []struct {
		name string
		env  []string
		pc   func(*meshapi.ProxyConfig)
		want string // "" means accepted
	}{
		{"injector defaults", nil, none, ""},
		{"CRL enabled", []string{"PILOT_ENABLE_CA_CRL=true"}, none, ""},
		{"PCDS", []string{"PROXY_CONFIG_XDS_AGENT=true"}, none, ""},
		{"compliance", []string{"COMPLIANCE_POLICY=fips-140-2"}, none, ""},
		{"TLS client key, file certs", []string{"FILE_MOUNTED_CERTS=true", "ISTIO_META_TLS_CLIENT_KEY=/k"}, none, ""},
		{"readinessProbe", nil, func(pc *meshapi.ProxyConfig) { pc.ReadinessProbe = &meshapi.ReadinessProbe{} }, ""},
		{"access log service", nil, func(pc *meshapi.ProxyConfig) {
			pc.EnvoyAccessLogService = &meshapi.RemoteService{Address: "als:9000"}
		}, ""},
		{"GoogleCA", []string{"CA_PROVIDER=GoogleCA"}, none, "CA_PROVIDER=GoogleCA"},
		{"Google CA address", []string{"CA_ADDR=meshca.googleapis.com:443"}, none, "googleapis.com"},
		{"GKE certificates", []string{"CA_PROVIDER=GkeWorkloadCertificate"}, none, "CA_PROVIDER=GkeWorkloadCertificate"},
		{"privateKeyProvider", nil, func(pc *meshapi.ProxyConfig) { pc.PrivateKeyProvider = &meshapi.PrivateKeyProvider{} }, "privateKeyProvider"},
	} {
		env, err := options.Parse(tc.env)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = unsupported(env, pcWith(tc.pc))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not supported yet")):
			t.Errorf("%s: err = %v, want it to name %s and say it is not supported yet", tc.name, err, tc.want)
		}
	}

	// End to end: the agent exits 2 naming the setting and starts nothing.
	p := newPod(t, "", "CA_PROVIDER=GkeWorkloadCertificate")
	code, _, stderr := p.run(t, "proxy", "sidecar")
	if code != exitUsage || !strings.Contains(stderr, "GkeWorkloadCertificate") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	p.nothingStarted(t)
}
