package main

// HOOK POINTS. The other parts (bootstrap/, certs/, mux/, dns/, status/) plug in here; nothing
// else in the proxy command needs to change when they do.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/lifecycle"
)

// resolveProxyConfig returns the effective ProxyConfig settings the wiring needs.
// HOOK: replace the placeholder with the bootstrap package's layering (mesh file at
// a.flags.meshConfig, PROXY_CONFIG, ./etc/istio/pod/annotations) and copy its result into
// proxySettings.
func resolveProxyConfig(a *agent) (proxySettings, error) {
	return placeholderResolveProxyConfig(a.env)
}

// partServices returns the agent's parts in Istio's start order; Envoy is appended after them.
// HOOK: the lead plugs, in this order:
//   - dns/         KeepDuringDrain (when ISTIO_META_DNS_CAPTURE / ENABLE_DNS_SERVER)
//   - certs/ + SDS KeepDuringDrain; Start binds ./var/run/secrets/workload-spiffe-uds/socket
//   - mux/         KeepDuringDrain; Start binds ./etc/istio/proxy/XDS and dials istiod
//   - gRPC bootstrap: Start only, writes a.env.GRPCXDSBootstrap
//   - status/      not kept (stops listening as soon as shutdown begins); /quitquitquit calls
//     a.envoy.Quit() then a.shutdown(), /drain calls a.envoy.Drain(ctx)
func partServices(a *agent) []lifecycle.Service {
	_ = a
	return nil
}

// writeBootstrap renders Envoy's bootstrap at path (passed to Envoy with -c).
// HOOK: replace writePlaceholderBootstrap with the bootstrap package's renderer.
func writeBootstrap(a *agent, path string) error {
	return writePlaceholderBootstrap(a, path)
}

// writePlaceholderBootstrap is a PLACEHOLDER: a minimal but valid Envoy bootstrap (node identity
// and the admin listener, nothing else), used only until the bootstrap package is wired in.
func writePlaceholderBootstrap(a *agent, path string) error {
	type socketAddress struct {
		Address   string `json:"address"`
		PortValue int    `json:"port_value"`
	}
	var bs struct {
		Node struct {
			ID      string `json:"id"`
			Cluster string `json:"cluster"`
		} `json:"node"`
		Admin struct {
			Address struct {
				SocketAddress socketAddress `json:"socket_address"`
			} `json:"address"`
		} `json:"admin"`
	}
	bs.Node.ID = a.identity.NodeID()
	bs.Node.Cluster = a.settings.ServiceCluster
	bs.Admin.Address.SocketAddress = socketAddress{Address: a.adminHost(), PortValue: a.settings.ProxyAdminPort}
	b, err := json.Marshal(&bs)
	if err != nil {
		return fmt.Errorf("encoding placeholder bootstrap: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing bootstrap: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing bootstrap: %w", err)
	}
	return nil
}
