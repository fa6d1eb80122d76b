package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestConcurrencyRules: Istio's order (pilot/cmd/pilot-agent/config/config.go, 1.28.10 .. master):
// ProxyConfig concurrency, else ISTIO_CPU_LIMIT when set; the legacy --concurrency flag overrides
// both, with a warning. The value is written into the ProxyConfig, as Istio's is, so the
// PROXY_CONFIG node metadata carries it (found side by side: bootstrap/SIDE_BY_SIDE.md).
func TestConcurrencyRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pc        *wrapperspb.Int32Value
		flag, cpu int
		want      *wrapperspb.Int32Value
		warned    bool
	}{
		{"nothing set: Envoy's default", nil, 0, 0, nil, false},
		{"CPU limit fills an unset concurrency", nil, 0, 3, wrapperspb.Int32(3), false},
		{"ProxyConfig wins over the CPU limit", wrapperspb.Int32(2), 0, 3, wrapperspb.Int32(2), false},
		{"explicit 0 in ProxyConfig wins over the CPU limit", wrapperspb.Int32(0), 0, 3, wrapperspb.Int32(0), false},
		{"flag wins over both", wrapperspb.Int32(2), 5, 3, wrapperspb.Int32(5), true},
	} {
		pc := &meshapi.ProxyConfig{Concurrency: tc.pc}
		var buf bytes.Buffer
		applyConcurrency(pc, tc.flag, tc.cpu, slog.New(slog.NewTextHandler(&buf, nil)))
		warned := strings.Contains(buf.String(), "level=WARN")
		got := pc.GetConcurrency()
		if (got == nil) != (tc.want == nil) || got.GetValue() != tc.want.GetValue() || warned != tc.warned {
			t.Errorf("%s: concurrency %v (warned %v), want %v (%v)", tc.name, got, warned, tc.want, tc.warned)
		}
		if s := settingsOf(pc); s.Concurrency != int(tc.want.GetValue()) || s.ConcurrencySet != (tc.want != nil) {
			t.Errorf("%s: settings %d set=%v", tc.name, s.Concurrency, s.ConcurrencySet)
		}
	}
}

// TestProxyConfigAsIstioConstructs: resolveProxyConfig changes the ProxyConfig as Istio's
// ConstructProxyConfig does (pilot/cmd/pilot-agent/config/config.go, 1.28.10 .. master): the CPU
// limit becomes its concurrency; a statsd address that resolves becomes ip:port (Istio's
// ResolveAddr, pilot/pkg/util/network/ip.go); one that does not is cleared with a warning, and the
// agent goes on.
func TestProxyConfigAsIstioConstructs(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		statsd, want string
		warned       bool
	}{
		{"127.0.0.1:8125", "127.0.0.1:8125", false},
		{"[::1]:8125", "[::1]:8125", false},
		{"statsd.invalid:8125", "", true},
		{"$(HOST_IP):8125", "", true}, // Istio resolves before any $(HOST_IP) substitution
	} {
		env, err := options.Parse([]string{"ISTIO_CPU_LIMIT=3", "HOST_IP=10.0.0.7", `PROXY_CONFIG={"statsdUdpAddress": "` + tc.statsd + `"}`})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		pc, s, err := resolveProxyConfig(t.Context(), &proxyFlags{meshConfig: "absent-mesh"}, env, slog.New(slog.NewTextHandler(&buf, nil)))
		if err != nil {
			t.Fatalf("%s: %v", tc.statsd, err)
		}
		if pc.GetStatsdUdpAddress() != tc.want || strings.Contains(buf.String(), "resolve StatsdUdpAddress failed") != tc.warned {
			t.Errorf("%s: statsdUdpAddress %q, want %q (warned: %v)\n%s", tc.statsd, pc.GetStatsdUdpAddress(), tc.want, tc.warned, &buf)
		}
		if pc.GetConcurrency().GetValue() != 3 || s.Concurrency != 3 {
			t.Errorf("%s: concurrency %v / %d, want 3 from ISTIO_CPU_LIMIT", tc.statsd, pc.GetConcurrency(), s.Concurrency)
		}
	}
}

// TestTemplateFileIntoProxyConfig: Istio's proxy command (pilot/cmd/pilot-agent/app/cmd.go, every
// tag) writes --templateFile into the ProxyConfig's proxyBootstrapTemplatePath, so PROXY_CONFIG
// carries it, unless customConfigFile is set (found side by side: bootstrap/SIDE_BY_SIDE.md).
func TestTemplateFileIntoProxyConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct{ proxyConfig, want string }{
		{`{}`, "./custom.tmpl.json"},
		{`{"proxyBootstrapTemplatePath": "/etc/pc.tmpl.json"}`, "./custom.tmpl.json"},
		{`{"customConfigFile": "/etc/envoy.json", "proxyBootstrapTemplatePath": "/etc/pc.tmpl.json"}`, "/etc/pc.tmpl.json"},
	} {
		env, err := options.Parse([]string{"PROXY_CONFIG=" + tc.proxyConfig})
		if err != nil {
			t.Fatal(err)
		}
		pc, _, err := resolveProxyConfig(t.Context(), &proxyFlags{meshConfig: "absent-mesh", templateFile: "./custom.tmpl.json"}, env, slog.New(slog.DiscardHandler))
		if err != nil || pc.GetProxyBootstrapTemplatePath() != tc.want {
			t.Errorf("%s: proxyBootstrapTemplatePath %q (%v), want %q", tc.proxyConfig, pc.GetProxyBootstrapTemplatePath(), err, tc.want)
		}
	}
}
