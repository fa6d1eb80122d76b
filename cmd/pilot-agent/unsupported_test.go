package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"

	"github.com/wingman-mesh/wingman/bootstrap/proxyconfig"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
)

// TestUnsupportedSettingsRefused: every setting docs/compat.md marks "refused" fails the start
// naming itself, while Istio's injector defaults (PILOT_ENABLE_CA_CRL=true without a CRL file,
// COMPLIANCE_POLICY unset, CA_PROVIDER=Citadel) start. The expected refusals follow
// options.Compat; which values Istio's injector sets was read from its injection template.
func TestUnsupportedSettingsRefused(t *testing.T) {
	dir := t.TempDir()
	crl := filepath.Join(dir, "ca-crl.pem")
	noCRL := filepath.Join(dir, "absent.pem")
	if err := os.WriteFile(crl, []byte("crl"), 0o644); err != nil {
		t.Fatal(err)
	}
	pcWith := func(f func(*meshv1alpha1.ProxyConfig)) *meshv1alpha1.ProxyConfig {
		pc := proxyconfig.Default()
		f(pc)
		return pc
	}
	none := func(*meshv1alpha1.ProxyConfig) {}
	for _, tc := range []struct {
		name     string
		env      []string
		pc       func(*meshv1alpha1.ProxyConfig)
		template string
		crl      string
		want     string // "" means accepted
	}{
		{"injector defaults", nil, none, "", noCRL, ""},
		{"CRL enabled by default, no CRL file", []string{"PILOT_ENABLE_CA_CRL=true"}, none, "", noCRL, ""},
		{"CRL disabled with a CRL file", []string{"PILOT_ENABLE_CA_CRL=false"}, none, "", crl, ""},
		{"CRL file present", nil, none, "", crl, "PILOT_ENABLE_CA_CRL"},
		{"PCDS", []string{"PROXY_CONFIG_XDS_AGENT=true"}, none, "", noCRL, "PROXY_CONFIG_XDS_AGENT"},
		{"PCDS off", []string{"PROXY_CONFIG_XDS_AGENT=false"}, none, "", noCRL, ""},
		{"compliance", []string{"COMPLIANCE_POLICY=fips-140-2"}, none, "", noCRL, "COMPLIANCE_POLICY=fips-140-2"},
		{"GoogleCA", []string{"CA_PROVIDER=GoogleCA"}, none, "", noCRL, "CA_PROVIDER=GoogleCA"},
		{"Google CA address", []string{"CA_ADDR=meshca.googleapis.com:443"}, none, "", noCRL, "googleapis.com"},
		{"GKE certificates", []string{"CA_PROVIDER=GkeWorkloadCertificate"}, none, "", noCRL, "CA_PROVIDER=GkeWorkloadCertificate"},
		{"TLS client key, file certs", []string{"FILE_MOUNTED_CERTS=true", "ISTIO_META_TLS_CLIENT_KEY=/k"}, none, "", noCRL, "ISTIO_META_TLS_CLIENT_KEY"},
		{"TLS client chain from proxyMetadata", []string{"FILE_MOUNTED_CERTS=true"}, func(pc *meshv1alpha1.ProxyConfig) {
			pc.ProxyMetadata = map[string]string{"ISTIO_META_TLS_CLIENT_CERT_CHAIN": "/c"}
		}, "", noCRL, "ISTIO_META_TLS_CLIENT_CERT_CHAIN"},
		{"TLS client key without file certs", []string{"ISTIO_META_TLS_CLIENT_KEY=/k"}, none, "", noCRL, ""},
		{"readinessProbe", nil, func(pc *meshv1alpha1.ProxyConfig) { pc.ReadinessProbe = &networkingv1alpha3.ReadinessProbe{} }, "", noCRL, "readinessProbe"},
		{"privateKeyProvider", nil, func(pc *meshv1alpha1.ProxyConfig) { pc.PrivateKeyProvider = &meshv1alpha1.PrivateKeyProvider{} }, "", noCRL, "privateKeyProvider"},
		{"access log service", nil, func(pc *meshv1alpha1.ProxyConfig) {
			pc.EnvoyAccessLogService = &meshv1alpha1.RemoteService{Address: "als:9000"}
		}, "", noCRL, "envoyAccessLogService"},
		{"access log service, custom template", nil, func(pc *meshv1alpha1.ProxyConfig) {
			pc.EnvoyAccessLogService = &meshv1alpha1.RemoteService{Address: "als:9000"}
		}, "/t.json", noCRL, ""},
	} {
		env, err := options.Parse(tc.env)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = unsupported(env, pcWith(tc.pc), tc.template, tc.crl)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not supported yet")):
			t.Errorf("%s: err = %v, want it to name %s and say it is not supported yet", tc.name, err, tc.want)
		}
	}

	// End to end: the agent exits 2 naming the setting and starts nothing.
	p := newPod(t, "", "PROXY_CONFIG_XDS_AGENT=true")
	code, _, stderr := p.run(t, "proxy", "sidecar")
	if code != exitUsage || !strings.Contains(stderr, "PROXY_CONFIG_XDS_AGENT") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	p.nothingStarted(t)
}
