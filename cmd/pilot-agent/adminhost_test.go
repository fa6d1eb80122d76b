package main

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/node"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/status"
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

// TestReadinessProbesWhereEnvoyListens: INSTANCE_IP=fd00::10 with ISTIO_DUAL_STACK=true: the
// bootstrap puts Envoy's admin on [::1] and readiness probes it there, as Istio's agent (its
// status server's localhost choice, pilot/cmd/pilot-agent/status/server.go at 1.30.3). Real
// sockets: an admin stand-in listening only on [::1]:port. Before, readiness probed 127.0.0.1 and
// the agent never became ready (issue 28).
func TestReadinessProbesWhereEnvoyListens(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "cluster_manager.cds.update_success: 1\nlistener_manager.lds.update_success: 1\n"+
			"listener_manager.workers_started: 1\nserver.state: 0\n")
	})}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	defer func() { srv.Close(); <-done }()

	ips := []string{"fd00::10", "10.0.0.5", "127.0.0.1", "::1"}
	a := &agent{identity: node.Identity{IPs: ips}, flags: &proxyFlags{},
		env: &options.Env{DualStack: true, InstanceIP: netip.MustParseAddr("fd00::10")}}
	if a.statusLocalHost() != a.adminHost() {
		t.Errorf("readiness probes %s, the bootstrap puts the admin on %s", a.statusLocalHost(), a.adminHost())
	}
	a.settings.ProxyAdminPort = ln.Addr().(*net.TCPAddr).Port
	cfg := a.statusConfig(nil, nil, nil)
	cfg.ReadinessTimeout = 5 * time.Second
	st, err := status.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckReady(t.Context()); err != nil {
		t.Errorf("not ready with Envoy's admin on [::1]: %v", err)
	}
}
