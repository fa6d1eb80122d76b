package dns

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// AltResolvConf is the resolv.conf Istio's agent reads instead of /etc/resolv.conf when it
// listens on port 53 as root and the file exists: on VMs and in Docker without iptables DNS
// capture, /etc/resolv.conf points at the agent itself and the real nameservers are kept here.
const AltResolvConf = "/var/lib/istio/resolv.conf"

// Enabled reports whether the agent runs the DNS proxy, by the rule of Istio's
// Agent.isDNSServerEnabled (pkg/istio-agent/agent.go): DNS capture (ISTIO_META_DNS_CAPTURE)
// counts only for sidecars; ISTIO_META_ENABLE_DNS_SERVER starts it for any proxy type
// (gateways resolving multi-cluster names through the agent).
func Enabled(capture bool, nodeType string, enableServer bool) bool {
	return (capture && nodeType == "sidecar") || enableServer
}

// Port53 applies Istio's rule for a listen address ending in ":53" (NewLocalDNSServer in
// pkg/dns/client/dns.go) to c and returns the result. Run as root (uid 0), the proxy owns
// the real DNS port: queries are forwarded upstream even before the first NameTable
// (RespondBeforeSync), and altResolvConf replaces c.ResolvConf unless it is known not to
// exist (Istio tests only for "does not exist", so an unreadable file is still chosen and
// New then fails naming it). Not root, the address falls back to DefaultAddr, and warning
// says so for the caller to log at error level, as Istio does. Other addresses are
// returned unchanged with an empty warning.
func (c Config) Port53(uid int, altResolvConf string) (out Config, warning string) {
	if !strings.HasSuffix(c.Addr, ":53") {
		return c, ""
	}
	if uid != 0 {
		warning = "DNS_PROXY_ADDR " + c.Addr + " ends in :53 but the agent is not root; listening on " +
			DefaultAddr + " instead, as Istio does"
		c.Addr = DefaultAddr
		return c, warning
	}
	c.RespondBeforeSync = true
	if _, err := os.Stat(altResolvConf); !errors.Is(err, fs.ErrNotExist) {
		c.ResolvConf = altResolvConf
	}
	return c, ""
}
