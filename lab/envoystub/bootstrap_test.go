package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The bootstrap package's golden files are what the real agent writes.
func TestParseAgentBootstrap(t *testing.T) {
	b, err := os.ReadFile("../../bootstrap/testdata/defaults.golden.json")
	if err != nil {
		t.Skipf("bootstrap golden not available: %v", err)
	}
	bs, err := parseBootstrap(b)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if bs.xdsPipe != filepath.Join(wd, "etc/istio/proxy/XDS") {
		t.Errorf("xds pipe %q", bs.xdsPipe)
	}
	if bs.sdsPipe != filepath.Join(wd, "var/run/secrets/workload-spiffe-uds/socket") {
		t.Errorf("sds pipe %q", bs.sdsPipe)
	}
	if bs.apiType != "DELTA_GRPC" || bs.adminPort != 15000 || bs.node.GetId() == "" {
		t.Errorf("api %q, admin %d, node %q", bs.apiType, bs.adminPort, bs.node.GetId())
	}
}

func TestParseBootstrapRejectsBadInput(t *testing.T) {
	pipe := `{"name":"xds-grpc","load_assignment":{"endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"pipe":{"path":"XDS"}}}}]}]}}`
	admin := `"admin":{"address":{"socket_address":{"port_value":15000}}}`
	for name, tc := range map[string]struct{ in, want string }{
		"not json":     {`{`, "not JSON"},
		"no xds":       {`{` + admin + `}`, "no xds-grpc"},
		"no endpoint":  {`{` + admin + `,"static_resources":{"clusters":[{"name":"xds-grpc"}]}}`, "no endpoint"},
		"bad api":      {`{` + admin + `,"dynamic_resources":{"ads_config":{"api_type":"REST"}},"static_resources":{"clusters":[` + pipe + `]}}`, "REST"},
		"bad admin":    {`{"static_resources":{"clusters":[` + pipe + `]}}`, "admin port"},
		"bad node":     {`{"node":{"id":5},` + admin + `,"static_resources":{"clusters":[` + pipe + `]}}`, "node"},
		"tcp not pipe": {`{` + admin + `,"static_resources":{"clusters":[{"name":"xds-grpc","load_assignment":{"endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"socket_address":{}}}}]}]}}]}}`, "no pipe"},
	} {
		if _, err := parseBootstrap([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", name, err, tc.want)
		}
	}
	if _, err := configPath([]string{"--drain-time-s", "1"}); err == nil {
		t.Error("arguments without -c accepted")
	}
	if p, err := configPath([]string{"-l", "warning", "-c", "b.json"}); err != nil || p != "b.json" {
		t.Errorf("configPath = %q, %v", p, err)
	}
}

func FuzzParseBootstrap(f *testing.F) {
	if b, err := os.ReadFile("../../bootstrap/testdata/defaults.golden.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"admin":{"address":{"socket_address":{"port_value":1}}},"static_resources":{"clusters":[{"name":"xds-grpc","load_assignment":{"endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"pipe":{"path":"x"}}}}]}]}}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		bs, err := parseBootstrap(b)
		if err == nil && (bs.xdsPipe == "" || bs.adminPort <= 0) {
			t.Fatalf("accepted a bootstrap without an xds pipe or admin port: %+v", bs)
		}
	})
}
