package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/user"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/pflag"

	"github.com/wingman-mesh/wingman/capture"
	envlist "github.com/wingman-mesh/wingman/internal/environ"
	"github.com/wingman-mesh/wingman/internal/istiolog"
)

// iptablesFlag is one of Istio's istio-iptables flags (tools/istio-iptables/pkg/cmd/root.go):
// its environment variable is the flag name upper-cased with - as _ (Istio's flag.BindEnv),
// set before the command line is parsed, so the flag wins; extra variables (Istio's
// flag.AdditionalEnv) override the first.
type iptablesFlag struct {
	name, short, def, usage string
	isBool, noEnv, hidden   bool
	extraEnv                []string
}

var iptablesFlags = []iptablesFlag{
	{name: "envoy-port", short: "p", def: "15001", usage: "Envoy port to which all outbound TCP traffic is redirected", noEnv: true},
	{name: "inbound-capture-port", short: "z", def: "15006", usage: "port to which all inbound TCP traffic to the pod is redirected"},
	{name: "inbound-tunnel-port", short: "e", def: "15008", usage: "Istio tunnel (HBONE) port for inbound TCP traffic, never redirected"},
	{name: "proxy-uid", short: "u", usage: "comma-separated UIDs whose traffic is not redirected (default: the uid of $ENVOY_USER, else 1337)"},
	{name: "proxy-gid", short: "g", usage: "comma-separated GIDs whose traffic is not redirected (default: the -u value)"},
	{name: "istio-inbound-interception-mode", short: "m", usage: `how inbound connections reach Envoy: "REDIRECT" (default) or "TPROXY"`},
	{name: "istio-inbound-ports", short: "b", usage: `comma-separated inbound ports redirected to Envoy; "*" for all; empty for none`},
	{name: "istio-local-exclude-ports", short: "d", usage: `comma-separated inbound ports not redirected when -b is "*"`},
	{name: "istio-exclude-interfaces", short: "c", usage: "comma-separated interfaces on which nothing is redirected"},
	{name: "istio-service-cidr", short: "i", usage: `comma-separated outbound CIDRs redirected to Envoy; "*" for all; empty for none`},
	{name: "istio-service-exclude-cidr", short: "x", usage: "comma-separated outbound CIDRs never redirected"},
	{name: "istio-outbound-ports", short: "q", usage: "comma-separated outbound ports always redirected to Envoy"},
	{name: "istio-local-outbound-ports-exclude", short: "o", usage: "comma-separated outbound ports never redirected"},
	{name: "kube-virt-interfaces", short: "k", usage: "comma-separated virtual interfaces whose inbound traffic is treated as outbound"},
	{name: "istio-inbound-tproxy-mark", short: "t", def: "1337", usage: "packet mark of TPROXY-redirected inbound traffic"},
	{name: "istio-inbound-tproxy-route-table", short: "r", def: "133", usage: "routing table for TPROXY-marked packets"},
	{name: "dry-run", short: "n", isBool: true, usage: "print the rules that would be applied and change nothing"},
	{name: "iptables-probe-port", def: "15002", usage: "port the --run-validation probe connects to"},
	{name: "probe-timeout", def: "5s", usage: "how long --run-validation waits for a redirected probe"},
	{name: "skip-rule-apply", isBool: true, usage: "apply no rules (with --run-validation: only validate)"},
	{name: "run-validation", isBool: true, usage: "check that traffic is redirected (exit 126 when not)"},
	{name: "redirect-dns", isBool: true, usage: "redirect DNS (port 53) of the resolvers in /etc/resolv.conf to the agent on 15053", extraEnv: []string{"ISTIO_META_DNS_CAPTURE"}},
	{name: "drop-invalid", isBool: true, usage: "drop packets conntrack finds invalid instead of resetting", extraEnv: []string{"INVALID_DROP"}},
	{name: "dual-stack", isBool: true, usage: "program IPv6 too when the pod has any IPv6 address", extraEnv: []string{"ISTIO_DUAL_STACK"}},
	{name: "capture-all-dns", isBool: true, usage: "with DNS redirection, redirect all of port 53, not only the resolvers'"},
	{name: "network-namespace", hidden: true, usage: "refused: only istio-cni uses it, in-process"},
	{name: "cni-mode", isBool: true, hidden: true, usage: "refused: only istio-cni uses it, in-process"},
	{name: "reconcile", isBool: true, usage: "replace existing ISTIO_ rules that differ instead of failing"},
	{name: "cleanup-only", isBool: true, usage: "remove the capture instead of applying it"},
	{name: "force-apply", isBool: true, usage: "apply even when the rules appear to be in place"},
	{name: "native-nftables", isBool: true, usage: "program native nftables (nft) instead of iptables"},
	{name: "force-iptables-binary", usage: `use this iptables variant without detection: "legacy" or "nft"`},
}

// Environment-only settings (Istio's env.Register in tools/istio-iptables constants).
const (
	envLoopbackCIDR       = "ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR"
	envOwnerGroups        = "ISTIO_OUTBOUND_OWNER_GROUPS"
	envOwnerGroupsExclude = "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE"
	envEnvoyUser          = "ENVOY_USER"
)

func iptablesFlagSet(cleanup bool) (*pflag.FlagSet, *rootFlags) {
	name := "istio-iptables"
	if cleanup {
		name = "istio-clean-iptables"
	}
	fs, root := newRootFlagSet(name)
	for _, f := range iptablesFlags {
		if f.isBool {
			def := f.name == "cleanup-only" && cleanup
			fs.BoolP(f.name, f.short, def, f.usage)
		} else {
			fs.StringP(f.name, f.short, f.def, f.usage)
		}
		if f.hidden { // parsed only to be refused by name
			_ = fs.MarkHidden(f.name)
		}
	}
	return fs, root
}

// iptablesUsage is the help of istio-iptables and istio-clean-iptables.
func iptablesUsage(w io.Writer, fs *pflag.FlagSet) {
	commandUsage(w, fs.Name(), "Sets up the pod's traffic capture (iptables or native nftables) for the Istio sidecar", fs)
	fmt.Fprintf(w, `
Wingman programs the capture itself (package capture), with Istio's flags, environment and
rules, through iptables-restore or nft; Istio's agent is not run.

Environment: each flag but --envoy-port is also read from its name upper-cased with - as _
(ISTIO_SERVICE_CIDR, INBOUND_CAPTURE_PORT, ...; a flag given wins), and --redirect-dns from
ISTIO_META_DNS_CAPTURE, --drop-invalid from INVALID_DROP, --dual-stack from ISTIO_DUAL_STACK.
Only from the environment: %s (default 127.0.0.1/32), %s ("*": all groups) or
%s, %s (default istio-proxy: the uid when -u is not given).
`, envLoopbackCIDR, envOwnerGroups, envOwnerGroupsExclude, envEnvoyUser)
}

func iptablesEnvName(f iptablesFlag) string {
	return strings.ToUpper(strings.ReplaceAll(f.name, "-", "_"))
}

// runIstioIptables is `pilot-agent istio-iptables` (and Istio's older `istio-clean-iptables`):
// it programs the pod's traffic capture itself (package capture). Bad flags or variables exit
// 2 naming them before anything is applied; a failed apply exits 1 with nothing left half
// applied; a failed --run-validation exits 126, as Istio's.
func runIstioIptables(ctx context.Context, args, environ []string, sio stdio, cleanup bool) int {
	fs, root := iptablesFlagSet(cleanup)
	use := fs.Name()
	for _, f := range iptablesFlags {
		envs := f.extraEnv
		if !f.noEnv {
			envs = append([]string{iptablesEnvName(f)}, envs...)
		}
		for _, e := range envs {
			if v, ok := envlist.Lookup(environ, e); ok {
				if err := fs.Set(f.name, v); err != nil {
					return usageError(sio, "pilot-agent "+use, fmt.Errorf("%s=%q: %w", e, v, err))
				}
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		if isHelp(err) {
			iptablesUsage(sio.out, fs)
			return 0
		}
		return usageError(sio, "pilot-agent "+use, err)
	}
	if fs.NArg() > 0 {
		return usageError(sio, "pilot-agent "+use, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	opts, err := iptablesOptions(fs, environ)
	if err != nil {
		return usageError(sio, "pilot-agent "+use, err)
	}
	logs, err := root.newLogger(sio)
	if err != nil {
		return usageError(sio, "pilot-agent "+use, err)
	}
	defer logs.Close()
	log := logs.Logger(istiolog.DefaultScope)
	if err := fillFromHost(&opts, fs, environ); err != nil {
		if !opts.DryRun {
			fmt.Fprintf(sio.err, "Error: istio-iptables: %v\n", err)
			return 1
		}
		log.Warn("dry run: assuming an IPv4 pod", "error", err)
	}
	opts.Runner, opts.Out, opts.Log = capture.ExecRunner{}, sio.out, log
	if err := capture.Run(ctx, opts); err != nil {
		fmt.Fprintf(sio.err, "Error: istio-iptables: %v\n", err)
		if _, ok := errors.AsType[*capture.ValidationError](err); ok {
			return capture.ValidationExitCode
		}
		return 1
	}
	return 0
}

// iptablesOptions turns the parsed flags and the environment-only variables into the capture's
// typed options; every error names its flag or variable.
func iptablesOptions(fs *pflag.FlagSet, environ []string) (capture.Options, error) {
	str := func(n string) string { v, _ := fs.GetString(n); return v }
	bl := func(n string) bool { v, _ := fs.GetBool(n); return v }
	var errs []error
	check := func(flag string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", flag, err))
		}
	}
	cfg := capture.Defaults()
	var err error
	for _, p := range []struct {
		flag string
		dst  *uint16
	}{{"envoy-port", &cfg.ProxyPort}, {"inbound-capture-port", &cfg.InboundCapturePort},
		{"inbound-tunnel-port", &cfg.InboundTunnelPort}, {"iptables-probe-port", &cfg.ProbePort}} {
		*p.dst, err = capture.ParsePort(str(p.flag))
		check(p.flag, err)
	}
	cfg.ProxyUIDs, err = capture.ParseOwners(str("proxy-uid"))
	check("proxy-uid", err)
	cfg.ProxyGIDs, err = capture.ParseOwners(str("proxy-gid"))
	check("proxy-gid", err)
	cfg.Mode, err = capture.ParseMode(str("istio-inbound-interception-mode"))
	check("istio-inbound-interception-mode", err)
	cfg.TProxyMark, err = capture.ParseMark(str("istio-inbound-tproxy-mark"))
	check("istio-inbound-tproxy-mark", err)
	if n, e := fmt.Sscanf(str("istio-inbound-tproxy-route-table"), "%d", &cfg.TProxyRouteTable); n != 1 || e != nil ||
		cfg.TProxyRouteTable <= 0 || fmt.Sprint(cfg.TProxyRouteTable) != strings.TrimSpace(str("istio-inbound-tproxy-route-table")) {
		check("istio-inbound-tproxy-route-table", fmt.Errorf("%q: want a positive table number", str("istio-inbound-tproxy-route-table")))
	}
	for _, p := range []struct {
		flag string
		dst  *capture.Ports
	}{{"istio-inbound-ports", &cfg.InboundPorts}, {"istio-local-exclude-ports", &cfg.InboundPortsExclude},
		{"istio-outbound-ports", &cfg.OutboundPorts}, {"istio-local-outbound-ports-exclude", &cfg.OutboundPortsExclude}} {
		*p.dst, err = capture.ParsePorts(str(p.flag))
		check(p.flag, err)
	}
	for _, p := range []string{"istio-local-exclude-ports", "istio-outbound-ports", "istio-local-outbound-ports-exclude"} {
		if v, _ := capture.ParsePorts(str(p)); v.All {
			check(p, errors.New(`"*" is only meaningful for -b`))
		}
	}
	cfg.OutboundCIDRs, err = capture.ParseCIDRs(str("istio-service-cidr"))
	check("istio-service-cidr", err)
	cfg.OutboundCIDRsExclude, err = capture.ParseCIDRs(str("istio-service-exclude-cidr"))
	check("istio-service-exclude-cidr", err)
	cfg.ExcludeInterfaces, err = capture.ParseInterfaces(str("istio-exclude-interfaces"))
	check("istio-exclude-interfaces", err)
	cfg.VirtInterfaces, err = capture.ParseInterfaces(str("kube-virt-interfaces"))
	check("kube-virt-interfaces", err)
	if cfg.ProbeTimeout, err = time.ParseDuration(str("probe-timeout")); err != nil || cfg.ProbeTimeout <= 0 {
		check("probe-timeout", fmt.Errorf("%q: want a positive duration", str("probe-timeout")))
	}
	cfg.RedirectDNS, cfg.CaptureAllDNS, cfg.DropInvalid = bl("redirect-dns"), bl("capture-all-dns"), bl("drop-invalid")

	env := func(name string) (string, bool) { return envlist.Lookup(environ, name) }
	if v, ok := env(envLoopbackCIDR); ok {
		if cfg.LoopbackCIDR, err = netip.ParsePrefix(strings.TrimSpace(v)); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", envLoopbackCIDR, v, err))
		}
	}
	if v, ok := env(envOwnerGroups); ok && strings.TrimSpace(v) != "*" {
		cfg.OwnerGroupsOnly = true
		if cfg.OwnerGroupsInclude, err = capture.ParseOwners(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", envOwnerGroups, err))
		}
	}
	if v, ok := env(envOwnerGroupsExclude); ok {
		if cfg.OwnerGroupsExclude, err = capture.ParseOwners(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", envOwnerGroupsExclude, err))
		}
	}
	if bl("cni-mode") {
		errs = append(errs, errors.New("--cni-mode: not supported (only istio-cni uses it, in-process)"))
	}
	if str("network-namespace") != "" {
		errs = append(errs, errors.New("--network-namespace: not supported (only istio-cni uses it, in-process); run inside the pod's network namespace"))
	}
	force := str("force-iptables-binary")
	if force != "" && force != "legacy" && force != "nft" {
		errs = append(errs, fmt.Errorf("--force-iptables-binary=%q: want legacy or nft", force))
	}
	if bl("native-nftables") && force != "" {
		errs = append(errs, errors.New("--native-nftables and --force-iptables-binary: set at most one"))
	}
	if len(errs) == 0 {
		uids := cfg.ProxyUIDs
		cfg.ProxyUIDs = []string{capture.DefaultProxyUID} // filled from the host later when unset
		if err := cfg.Validate(); err != nil {
			errs = append(errs, err)
		}
		cfg.ProxyUIDs = uids
	}
	if len(errs) > 0 {
		return capture.Options{}, errors.Join(errs...)
	}
	return capture.Options{
		Config: cfg, DryRun: bl("dry-run"), SkipRuleApply: bl("skip-rule-apply"), RunValidation: bl("run-validation"),
		CleanupOnly: bl("cleanup-only"), Reconcile: bl("reconcile"), ForceApply: bl("force-apply"),
		NativeNftables: bl("native-nftables"), ForceBinary: force,
	}, nil
}

// fillFromHost completes the options from the host as Istio's FillConfigFromEnvironment does:
// the proxy uid from $ENVOY_USER, IPv6 from the pod's addresses, DNS servers from
// /etc/resolv.conf.
func fillFromHost(o *capture.Options, fs *pflag.FlagSet, environ []string) error {
	cfg := &o.Config
	if len(cfg.ProxyUIDs) == 0 {
		name, ok := envlist.Lookup(environ, envEnvoyUser)
		if !ok {
			name = "istio-proxy"
		}
		cfg.ProxyUIDs = []string{capture.DefaultProxyUID}
		if u, err := user.Lookup(name); err == nil {
			cfg.ProxyUIDs = []string{u.Uid}
		}
	}
	if len(cfg.ProxyGIDs) == 0 {
		cfg.ProxyGIDs = cfg.ProxyUIDs
	}
	if cfg.RedirectDNS && !cfg.CaptureAllDNS {
		rc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil {
			return fmt.Errorf("--redirect-dns: reading /etc/resolv.conf: %w", err)
		}
		for _, s := range rc.Servers {
			if a, err := netip.ParseAddr(s); err == nil {
				cfg.DNSServers = append(cfg.DNSServers, a.Unmap())
			}
		}
	}
	dual, _ := fs.GetBool("dual-stack")
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return err
	}
	v6, found := podIPv6(addrs, dual)
	cfg.IPv6, o.HostIPv6 = v6, v6
	if !found {
		return errors.New("no valid local IP address found (the pod has no address besides loopback and link-local)")
	}
	return nil
}

// podIPv6 is Istio's getLocalIP: the first address that is not loopback or link-local decides
// the family; with dual stack, any IPv6 such address makes it IPv6.
func podIPv6(addrs []net.Addr, dual bool) (v6, found bool) {
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
			continue
		}
		found = true
		if !dual || ip.Is6() {
			return ip.Is6(), true
		}
	}
	return false, found
}
