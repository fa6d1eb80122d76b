package bootstrap

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// fakeResolver answers every lookup with the same addresses or error, and records the network.
type fakeResolver struct {
	ips     []netip.Addr
	err     error
	network string
}

func (f *fakeResolver) LookupNetIP(_ context.Context, network, _ string) ([]netip.Addr, error) {
	f.network = network
	return f.ips, f.err
}

// TestResolveStatsdAddressAsIstio: the expected values are Istio's ResolveAddr
// (pilot/pkg/util/network/ip.go, identical 1.28.10 .. master): a lookup of network "ip", the first
// IPv4 answer wins, else the last answer; IPv4-mapped answers are unmapped; a port that does not
// parse gives no address and no error (Istio then writes "" for statsdUdpAddress).
func TestResolveStatsdAddressAsIstio(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name string
		addr string
		ips  []netip.Addr
		want string
	}{
		{"only IPv4", "statsd:8125", []netip.Addr{a("10.0.0.1")}, "10.0.0.1:8125"},
		{"IPv6 first, IPv4 wins", "statsd:8125", []netip.Addr{a("fd00::1"), a("10.0.0.2"), a("10.0.0.3")}, "10.0.0.2:8125"},
		{"only IPv6: the last", "statsd:8125", []netip.Addr{a("fd00::1"), a("fd00::2")}, "[fd00::2]:8125"},
		{"mapped IPv4 unmapped", "statsd:8125", []netip.Addr{a("::ffff:10.0.0.9")}, "10.0.0.9:8125"},
		{"port out of range", "statsd:70000", []netip.Addr{a("10.0.0.1")}, "invalid AddrPort"},
	} {
		r := &fakeResolver{ips: tc.ips}
		got, err := ResolveStatsdAddress(t.Context(), tc.addr, r, 0)
		if err != nil || got.String() != tc.want || r.network != "ip" {
			t.Errorf("%s: %v %v (network %q), want %s over \"ip\"", tc.name, got, err, r.network, tc.want)
		}
	}
	if _, err := ResolveStatsdAddress(t.Context(), "statsd", &fakeResolver{}, 0); err == nil {
		t.Error("no port: want an error")
	}
	if _, err := ResolveStatsdAddress(t.Context(), "statsd:8125", &fakeResolver{err: errors.New("nxdomain")}, 0); err == nil {
		t.Error("lookup failure: want an error")
	}
}

// TestUnresolvableStatsdDropped: Istio's agent logs a warning and runs without statsd when the host
// does not resolve (pilot/cmd/pilot-agent/config/config.go, 1.28.10 .. master: "resolve
// StatsdUdpAddress failed", then StatsdUdpAddress = ""), so neither render fails nor carries a
// statsd sink, and one warning names the field.
func TestUnresolvableStatsdDropped(t *testing.T) {
	cfg := baseConfig(t)
	log, warnings := newWarnRecorder()
	cfg.Logger = log
	cfg.ProxyConfig.StatsdUdpAddress = "statsd.invalid:8125"
	cfg.Resolver = &fakeResolver{err: errors.New("no such host")}
	out, err := Render(t.Context(), cfg)
	if err != nil {
		t.Fatalf("typed render: %v", err)
	}
	if strings.Contains(string(out), "envoy.stat_sinks.statsd") {
		t.Error("typed render has a statsd sink for a host that does not resolve")
	}
	tout, err := RenderTemplate(t.Context(), cfg, "testdata/every_param.tmpl.json")
	if err != nil {
		t.Fatalf("template render: %v", err)
	}
	if strings.Contains(string(tout), "envoy.stat_sinks.statsd") {
		t.Error("template render has a statsd sink for a host that does not resolve")
	}
	if n := strings.Count(warnings.String(), "statsdUdpAddress=statsd.invalid:8125"); n != 2 {
		t.Errorf("want one warning per render naming statsdUdpAddress, got %d: %s", n, warnings)
	}
	cfg.Resolver = &fakeResolver{ips: []netip.Addr{netip.MustParseAddr("10.9.8.7")}}
	out, err = Render(t.Context(), cfg)
	if err != nil || !strings.Contains(string(out), `"address":"10.9.8.7"`) && !strings.Contains(string(out), `"address": "10.9.8.7"`) {
		t.Errorf("resolvable statsd: %v\n%s", err, out)
	}
}
