package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// The capture's rules and their traffic are tested in package capture; these tests run the
// built agent (`pilot-agent istio-iptables`, `istio-clean-iptables`) in a network namespace
// of their own: flags and variables as Istio's, exit codes, all-or-nothing on bad input.

// injectorArgs are the init container's arguments in Istio's injection template.
var injectorArgs = []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT",
	"-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020", "--log_output_level=default:info", "--log_target=stderr"}

var netnsSeq atomic.Int32

// podNetns makes a network namespace with loopback and one pod address (10.99.0.2 on one end of a veth
// link). It fails rather than skips as root or in CI, where it must work.
func podNetns(t *testing.T) string {
	t.Helper()
	var why string
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := exec.LookPath("iptables-save"); err != nil {
		why = "no iptables (Debian package iptables)"
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("istio-iptables namespace tests cannot run in CI: %s", why)
		}
		t.Skipf("istio-iptables namespace tests need root and iptables: %s", why)
	}
	ns := fmt.Sprintf("wmagent%d-%d", os.Getpid(), netnsSeq.Add(1))
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	for _, c := range [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1"},
		{"-n", ns, "addr", "add", "10.99.0.2/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	return ns
}

// agentIn runs the agent in ns with env and returns exit code, stdout and stderr.
func agentIn(t *testing.T, ns string, env []string, args ...string) (int, string, string) {
	t.Helper()
	c := exec.Command("ip", append([]string{"netns", "exec", ns, agentBin}, args...)...)
	c.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func saveIn(t *testing.T, ns string) string {
	t.Helper()
	var all strings.Builder
	for _, bin := range []string{"iptables-save", "ip6tables-save", "iptables-legacy-save"} {
		out, err := exec.Command("ip", "netns", "exec", ns, bin).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", bin, err, out)
		}
		all.Write(out)
	}
	return all.String()
}

func TestIstioIptablesBadInputAppliesNothing(t *testing.T) {
	ns := podNetns(t)
	for _, tc := range []struct {
		env   []string
		args  []string
		names string // what the error must name
	}{
		{nil, []string{"-i", "10.0.0.0/33"}, "--istio-service-cidr"},
		{nil, []string{"-b", "80,http"}, "--istio-inbound-ports"},
		{nil, []string{"-d", "99999"}, "--istio-local-exclude-ports"},
		{nil, []string{"-p", "0"}, "--envoy-port"},
		{nil, []string{"-m", "TPROXYY"}, "--istio-inbound-interception-mode"},
		{nil, []string{"--bogus"}, "bogus"},
		{nil, []string{"-x", "*"}, "istio-service-exclude-cidr"},
		{nil, []string{"--cni-mode"}, "--cni-mode"},
		{nil, []string{"--force-iptables-binary", "fast"}, "--force-iptables-binary"},
		{[]string{"REDIRECT_DNS=maybe"}, nil, "REDIRECT_DNS"},
		{[]string{"ISTIO_META_DNS_CAPTURE=yes please"}, nil, "ISTIO_META_DNS_CAPTURE"},
		{[]string{"ISTIO_SERVICE_CIDR=10.0.0.0/8,bad"}, nil, "--istio-service-cidr"},
		{[]string{"ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR=10.0.0.0/8"}, nil, "ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR"},
		{[]string{"ISTIO_OUTBOUND_OWNER_GROUPS=a b"}, nil, "ISTIO_OUTBOUND_OWNER_GROUPS"},
	} {
		args := append(append([]string(nil), injectorArgs...), tc.args...)
		if tc.env != nil { // variables count only where no flag is given
			args = []string{"istio-iptables", "--log_target=stderr"}
		}
		code, _, stderr := agentIn(t, ns, tc.env, args...)
		if code != exitUsage || !strings.Contains(stderr, tc.names) {
			t.Errorf("%v %v: exit %d, stderr %q; want exit 2 naming %s", tc.env, tc.args, code, stderr, tc.names)
		}
	}
	if s := saveIn(t, ns); strings.Contains(s, "ISTIO") {
		t.Errorf("rules were applied by a refused run:\n%s", s)
	}
}

func TestIstioIptablesApplyAndClean(t *testing.T) {
	ns := podNetns(t)
	// The dry run prints the restore input and applies nothing.
	code, out, stderr := agentIn(t, ns, nil, append(append([]string(nil), injectorArgs...), "--dry-run")...)
	if code != 0 || !strings.Contains(out, "-A OUTPUT -j ISTIO_OUTPUT") || !strings.Contains(out, "--dport 15020 -j RETURN") {
		t.Fatalf("dry run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if s := saveIn(t, ns); strings.Contains(s, "ISTIO") {
		t.Fatalf("the dry run applied rules:\n%s", s)
	}

	// ISTIO_META_DNS_CAPTURE and --capture-all-dns: DNS chains; run twice (idempotent).
	env := []string{"ISTIO_META_DNS_CAPTURE=true"}
	args := append(append([]string(nil), injectorArgs...), "--capture-all-dns")
	for i := 0; i < 2; i++ {
		if code, _, stderr := agentIn(t, ns, env, args...); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i+1, code, stderr)
		}
	}
	s := saveIn(t, ns)
	for _, want := range []string{"-A OUTPUT -j ISTIO_OUTPUT", "-A ISTIO_OUTPUT -j ISTIO_OUTPUT_DNS",
		"--dport 53 -j REDIRECT --to-ports 15053", "-A PREROUTING -p tcp -j ISTIO_INBOUND"} {
		if !strings.Contains(s, want) {
			t.Errorf("after apply, missing %q in:\n%s", want, s)
		}
	}
	if strings.Count(s, "-A OUTPUT -j ISTIO_OUTPUT\n") != 1 {
		t.Errorf("the second run duplicated rules:\n%s", s)
	}

	// Istio's older clean-up command, with the same flags.
	clean := append([]string{"istio-clean-iptables"}, args[1:]...)
	if code, _, stderr := agentIn(t, ns, env, clean...); code != 0 {
		t.Fatalf("istio-clean-iptables: exit %d: %s", code, stderr)
	}
	if s := saveIn(t, ns); strings.Contains(s, "ISTIO") {
		t.Errorf("clean-up left rules:\n%s", s)
	}
}

func TestIstioIptablesHelp(t *testing.T) {
	c := exec.Command(agentBin, "istio-iptables", "--help")
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--istio-service-cidr", "-i,", "--cleanup-only", "--native-nftables", "--dry-run"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("help lacks %s:\n%s", want, out)
		}
	}
}

// TestIstioIptablesNativeNftables: NATIVE_NFTABLES selects nftables; --cleanup-only removes
// the tables again.
func TestIstioIptablesNativeNftables(t *testing.T) {
	ns := podNetns(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft (Debian package nftables) is needed: %v", err)
	}
	env := []string{"NATIVE_NFTABLES=true"}
	if code, _, stderr := agentIn(t, ns, env, injectorArgs...); code != 0 {
		t.Fatalf("apply: exit %d: %s", code, stderr)
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "inet", "istio-proxy-nat").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "redirect to :15001") || !strings.Contains(string(out), "jump istio-output") {
		t.Fatalf("nft table after apply: %v\n%s", err, out)
	}
	if s := saveIn(t, ns); strings.Contains(s, "ISTIO") {
		t.Errorf("native nftables also wrote iptables rules:\n%s", s)
	}
	if code, _, stderr := agentIn(t, ns, env, append(append([]string(nil), injectorArgs...), "--cleanup-only")...); code != 0 {
		t.Fatalf("clean-up: exit %d: %s", code, stderr)
	}
	out, _ = exec.Command("ip", "netns", "exec", ns, "nft", "list", "tables").CombinedOutput()
	if strings.Contains(string(out), "istio-proxy-") {
		t.Errorf("clean-up left tables:\n%s", out)
	}
}

// TestIstioIptablesValidationFails: --run-validation without a capture exits 126, Istio's
// code for it (the capture-level test checks it passes with one).
func TestIstioIptablesValidationFails(t *testing.T) {
	ns := podNetns(t)
	args := append(append([]string(nil), injectorArgs...), "--run-validation", "--skip-rule-apply", "--probe-timeout=1s")
	code, _, stderr := agentIn(t, ns, nil, args...)
	if code != 126 || !strings.Contains(stderr, "validation") {
		t.Errorf("exit %d, stderr %q; want 126 and a validation error", code, stderr)
	}
}

// TestIstioIptablesEnvironment: Istio's precedence, seen in --dry-run output (nothing runs):
// a variable sets a flag's value, the flag given wins, ISTIO_META_DNS_CAPTURE overrides
// REDIRECT_DNS.
func TestIstioIptablesEnvironment(t *testing.T) {
	dry := func(env []string, args ...string) string {
		t.Helper()
		c := exec.Command(agentBin, append([]string{"istio-iptables", "-n", "--log_target=stderr"}, args...)...)
		c.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%v %v: %v", env, args, err)
		}
		return string(out)
	}
	if out := dry([]string{"ISTIO_SERVICE_CIDR=10.1.0.0/16"}); !strings.Contains(out, "-A ISTIO_OUTPUT -d 10.1.0.0/16 -j ISTIO_REDIRECT") {
		t.Errorf("ISTIO_SERVICE_CIDR not used:\n%s", out)
	}
	if out := dry([]string{"ISTIO_SERVICE_CIDR=10.1.0.0/16"}, "-i", "10.2.0.0/16"); strings.Contains(out, "10.1.0.0/16") ||
		!strings.Contains(out, "-d 10.2.0.0/16 -j ISTIO_REDIRECT") {
		t.Errorf("the flag did not win over ISTIO_SERVICE_CIDR:\n%s", out)
	}
	if out := dry([]string{"REDIRECT_DNS=false", "ISTIO_META_DNS_CAPTURE=true"}, "--capture-all-dns"); !strings.Contains(out, "ISTIO_OUTPUT_DNS") {
		t.Errorf("ISTIO_META_DNS_CAPTURE=true did not enable DNS capture:\n%s", out)
	}
	if out := dry([]string{"ISTIO_META_DNS_CAPTURE=true"}, "--capture-all-dns", "--redirect-dns=false"); strings.Contains(out, "ISTIO_OUTPUT_DNS") {
		t.Errorf("--redirect-dns=false did not win:\n%s", out)
	}
	if out := dry([]string{"INBOUND_CAPTURE_PORT=15106", "PROXY_UID=1500"}, "-b", "*"); !strings.Contains(out, "--to-ports 15106") ||
		!strings.Contains(out, "--uid-owner 1500") || !strings.Contains(out, "--gid-owner 1500") {
		t.Errorf("INBOUND_CAPTURE_PORT / PROXY_UID (and the gid defaulting to it) not used:\n%s", out)
	}
}

func TestPodIPv6(t *testing.T) {
	n := func(s string) net.Addr {
		ip, ipn, _ := net.ParseCIDR(s)
		ipn.IP = ip
		return ipn
	}
	for _, tc := range []struct {
		addrs       []string
		dual, v6, f bool
	}{
		{[]string{"127.0.0.1/8", "::1/128"}, false, false, false},
		{[]string{"127.0.0.1/8", "fe80::1/64", "10.0.0.2/24", "fd00::2/64"}, false, false, true},
		{[]string{"127.0.0.1/8", "fd00::2/64", "10.0.0.2/24"}, false, true, true},
		{[]string{"10.0.0.2/24", "fd00::2/64"}, true, true, true},
		{[]string{"10.0.0.2/24"}, true, false, true},
	} {
		var addrs []net.Addr
		for _, a := range tc.addrs {
			addrs = append(addrs, n(a))
		}
		if v6, found := podIPv6(addrs, tc.dual); v6 != tc.v6 || found != tc.f {
			t.Errorf("%v dual=%v: v6=%v found=%v, want %v %v", tc.addrs, tc.dual, v6, found, tc.v6, tc.f)
		}
	}
}

// TestIptablesToldOneWay: istio-iptables is programmed by Wingman's capture package (see
// runIstioIptables), and --help, the README (its image paragraph and exit-code table), the
// exit-code help and the Dockerfile say so; they used to say it execs Istio's programmer,
// kept in the image as pilot-agent-istio.
func TestIptablesToldOneWay(t *testing.T) {
	out, err := exec.Command(agentBin, "istio-iptables", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "Wingman programs the capture itself (package capture)") {
		t.Errorf("istio-iptables --help does not say who programs the capture:\n%s", out)
	}
	stale := []string{"pilot-agent-istio", "programmer", "execs Istio"}
	for _, f := range []string{"../../README.md", "../../Dockerfile"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stale {
			if strings.Contains(string(b), s) {
				t.Errorf("%s still says %q", f, s)
			}
		}
		if !strings.Contains(string(b), "package capture") && !strings.Contains(string(b), "package `capture`") {
			t.Errorf("%s does not name package capture", f)
		}
	}
	for _, s := range append(stale, "126 when --run-validation") {
		if strings.Contains(exitCodesHelp, s) != (s == "126 when --run-validation") {
			t.Errorf("exit-code help and %q:\n%s", s, exitCodesHelp)
		}
	}
}
