package main

import (
	"testing"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/node"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
)

// TestAdminHostFollowsBootstrap: the agent probes Envoy's admin where the bootstrap puts it
// (Istio's config.go address families). An IPv6 INSTANCE_IP in a dual-stack pod puts it on ::1;
// probing 127.0.0.1 there never saw Envoy ready (issue 25).
func TestAdminHostFollowsBootstrap(t *testing.T) {
	for _, tc := range []struct {
		ips  []string
		dual bool
		want string
	}{
		{[]string{"fd00::5", "10.0.0.5"}, true, "::1"},
		{[]string{"fd00::5", "10.0.0.5"}, false, "127.0.0.1"},
		{[]string{"10.0.0.5", "fd00::5"}, true, "127.0.0.1"},
		{[]string{"fd00::5"}, false, "::1"},
		{[]string{"fd00::5", "127.0.0.1", "::1"}, true, "::1"},
	} {
		a := &agent{identity: node.Identity{IPs: tc.ips}, env: &options.Env{DualStack: tc.dual}}
		if got := a.adminHost(); got != tc.want {
			t.Errorf("IPs %v dual %v: admin host %s, want %s", tc.ips, tc.dual, got, tc.want)
		}
	}
}
