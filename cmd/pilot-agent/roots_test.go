package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/wingman-mesh/wingman/certs"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/transport/istiod"
)

// TestRootFilesAsIstio: the root certificate files and server name used for istiod and the CA
// follow Istio's agent (pkg/istio-agent/agent.go FindRootCAForXDS and FindRootCAForCA, read for
// the expected order): XDS_ROOT_CA / CA_ROOT_CA first (SYSTEM for the system pool), then the
// mounted ./etc/certs root (xDS) or PILOT_CERT_PROVIDER=custom (CA), then PROV_CERT, then the
// FILE_MOUNTED_CERTS root from ISTIO_META_TLS_CLIENT_ROOT_CERT (xDS), PILOT_CERT_PROVIDER=none is
// an error (xDS), else the istio-ca-root-cert ConfigMap mount. ISTIOD_SAN overrides the name.
func TestRootFilesAsIstio(t *testing.T) {
	t.Chdir(t.TempDir())
	parse := func(kv ...string) *options.Env {
		e, err := options.Parse(kv)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, tc := range []struct {
		env     []string
		want    string
		wantErr bool
	}{
		{[]string{"XDS_ROOT_CA=SYSTEM"}, "", false},
		{[]string{"XDS_ROOT_CA=/roots/x.pem", "PROV_CERT=/p"}, "/roots/x.pem", false},
		{[]string{"PROV_CERT=/p"}, "/p/root-cert.pem", false},
		{[]string{"FILE_MOUNTED_CERTS=true", "ISTIO_META_TLS_CLIENT_ROOT_CERT=/r/root.pem"}, "/r/root.pem", false},
		{[]string{"PILOT_CERT_PROVIDER=none"}, "", true},
		{nil, istiodRootPath, false},
	} {
		got, err := xdsRootPath(parse(tc.env...))
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("xDS root for %v: %q, %v; want %q (error %v)", tc.env, got, err, tc.want, tc.wantErr)
		}
	}
	// A root mounted at ./etc/certs wins over everything but XDS_ROOT_CA.
	if err := os.MkdirAll(filepath.Dir(customRootPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(customRootPath, []byte("pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := xdsRootPath(parse("PROV_CERT=/p")); got != customRootPath || err != nil {
		t.Errorf("mounted ./etc/certs root: %q, %v", got, err)
	}

	for _, tc := range []struct {
		s    certs.CARootSearch
		want string
	}{
		{certs.CARootSearch{CARootCA: "SYSTEM"}, certs.SystemRoots},
		{certs.CARootSearch{CARootCA: "/ca.pem", PilotCertProvider: "custom"}, "/ca.pem"},
		{certs.CARootSearch{PilotCertProvider: "custom", ProvCert: "/p"}, "./etc/certs/root-cert.pem"},
		{certs.CARootSearch{PilotCertProvider: "istiod", ProvCert: "/p/"}, "/p/root-cert.pem"},
		{certs.CARootSearch{PilotCertProvider: "istiod"}, "./var/run/secrets/istio/root-cert.pem"},
	} {
		if got := certs.CARootPathFor(tc.s); got != tc.want {
			t.Errorf("CA root for %+v: %q, want %q", tc.s, got, tc.want)
		}
	}

	for _, tc := range []struct {
		env     []string
		wantErr bool
	}{
		{[]string{"PILOT_CERT_PROVIDER=none"}, true},
		{[]string{"PILOT_CERT_PROVIDER=none", "CA_ROOT_CA=SYSTEM"}, false},
		{[]string{"PILOT_CERT_PROVIDER=none", "PROV_CERT=/p"}, false},
		{[]string{"PILOT_CERT_PROVIDER=none", "FILE_MOUNTED_CERTS=true"}, false},
		{[]string{"PILOT_CERT_PROVIDER=istiod"}, false},
	} {
		if err := caRootError(parse(tc.env...)); (err != nil) != tc.wantErr {
			t.Errorf("CA root for %v: %v, want error %v", tc.env, err, tc.wantErr)
		}
	}

	for _, tc := range []struct{ addr, san, want string }{
		{"istiod.istio-system.svc:15012", "", "istiod.istio-system.svc"},
		{"istiod.istio-system.svc:15012", "istiod.example", "istiod.example"},
	} {
		if got := istiod.ServerName(tc.addr, tc.san); got != tc.want {
			t.Errorf("server name for %s (ISTIOD_SAN %q): %q, want %q", tc.addr, tc.san, got, tc.want)
		}
	}
}

// TestCustomConfigFileUsedAsIs: a ProxyConfig customConfigFile is the file Envoy starts from and
// is not rendered (Istio's agent: ConfigPath = CustomConfigFile, ConfigCleanup = false).
func TestCustomConfigFileUsedAsIs(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		proxyConfig, want string
		render            bool
	}{
		{`{"customConfigFile": "/etc/envoy/mine.json"}`, "/etc/envoy/mine.json", false},
		{`{}`, "etc/istio/proxy/envoy-rev.json", true},
	} {
		env, err := options.Parse([]string{"PROXY_CONFIG=" + tc.proxyConfig})
		if err != nil {
			t.Fatal(err)
		}
		pc, settings, err := resolveProxyConfig(t.Context(), &proxyFlags{meshConfig: "absent-mesh"}, env, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if path, render := bootstrapPathFor(pc, settings.ConfigPath); path != tc.want || render != tc.render {
			t.Errorf("%s: %q render=%v, want %q render=%v", tc.proxyConfig, path, render, tc.want, tc.render)
		}
	}
}
