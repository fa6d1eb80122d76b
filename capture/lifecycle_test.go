package capture

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	counters    = regexp.MustCompile(`\[[0-9]+:[0-9]+\]`)
	nftCounters = regexp.MustCompile(`counter packets [0-9]+ bytes [0-9]+`)
)

// ruleset is the pod namespace's rules as iptables-save (both families, both variants) and nft
// print them, without comments and counters, so two snapshots compare by content.
func (l *lab) ruleset(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, bin := range []string{"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		out, err := l.run(l.pod, bin)
		if err != nil {
			t.Fatalf("%s: %v: %s", bin, err, out)
		}
		b.WriteString(nonEmptyTables(out))
	}
	out, err := l.run(l.pod, "nft", "list", "ruleset")
	if err != nil {
		t.Fatalf("nft list ruleset: %v: %s", err, out)
	}
	// iptables-nft's own tables show up here too; keep the capture's nft tables only, whole,
	// with their counters zeroed.
	in := false
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "table ") {
			in = strings.Contains(line, "istio-proxy-")
		}
		if in {
			b.WriteString(nftCounters.ReplaceAllString(line, "counter") + "\n")
		}
	}
	return b.String()
}

// nonEmptyTables keeps the tables of a save dump that hold anything: iptables cannot remove a
// table once used, so an empty one (built-in chains, ACCEPT policies, no rules) is no trace.
func nonEmptyTables(dump string) string {
	var out, block strings.Builder
	keep := false
	for _, line := range strings.Split(dump, "\n") {
		line = counters.ReplaceAllString(line, "")
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "*"):
			block.Reset()
			keep = false
		case line == "COMMIT":
			if keep {
				out.WriteString(block.String() + "COMMIT\n")
			}
			continue
		case strings.HasPrefix(line, ":"):
			name, policy, _ := strings.Cut(strings.TrimSpace(line[1:]), " ")
			if !builtinChains[name] || policy != "ACCEPT" {
				keep = true
			}
		default:
			keep = true
		}
		block.WriteString(line + "\n")
	}
	return out.String()
}

// TestRerunAndCleanup: applying twice changes nothing the second time; clean-up returns the
// namespace to exactly its state before; for iptables (REDIRECT and TPROXY, with IPv6 and DNS)
// and native nftables.
func TestRerunAndCleanup(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
	}{
		{"iptables", func(o *Options) {
			o.Config.IPv6, o.Config.RedirectDNS, o.Config.CaptureAllDNS = true, true, true
			o.Config.VirtInterfaces = []string{"virt0"}
			o.Config.ExcludeInterfaces = []string{"eth9"}
		}},
		{"iptables-tproxy", func(o *Options) {
			o.Config.IPv6, o.Config.Mode, o.Config.DropInvalid = true, TProxy, true
			o.Config.ExcludeInterfaces = []string{"eth9"}
		}},
		{"nftables", func(o *Options) {
			o.NativeNftables, o.Config.IPv6, o.Config.Mode = true, true, TProxy
		}},
		{"iptables-legacy", func(o *Options) {
			o.ForceBinary, o.Config.IPv6, o.Config.RedirectDNS, o.Config.CaptureAllDNS = "legacy", true, true, true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			// Someone else's rule in a shared chain must survive everything.
			if out, err := l.run(l.pod, "iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "--dport", "9", "-j", "RETURN"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			pristine := l.ruleset(t)
			rulesBefore, _ := l.run(l.pod, "ip", "-4", "rule", "show")
			o := base()
			tc.set(&o)
			if err := l.apply(o); err != nil {
				t.Fatalf("apply: %v", err)
			}
			applied := l.ruleset(t)
			if applied == pristine || !strings.Contains(strings.ToLower(applied), "istio") {
				t.Fatalf("apply changed nothing:\n%s", applied)
			}
			if err := l.apply(o); err != nil {
				t.Fatalf("second apply: %v", err)
			}
			if again := l.ruleset(t); again != applied {
				t.Errorf("second apply changed the rules:\nfirst:\n%s\nsecond:\n%s", applied, again)
			}
			o.CleanupOnly = true
			if err := l.apply(o); err != nil {
				t.Fatalf("clean-up: %v", err)
			}
			if after := l.ruleset(t); after != pristine {
				t.Errorf("clean-up left a difference:\nbefore:\n%s\nafter:\n%s", pristine, after)
			}
			if rulesAfter, _ := l.run(l.pod, "ip", "-4", "rule", "show"); rulesAfter != rulesBefore {
				t.Errorf("clean-up left ip rules:\nbefore:\n%s\nafter:\n%s", rulesBefore, rulesAfter)
			}
			if err := l.apply(o); err != nil { // clean-up of a clean namespace is fine
				t.Fatalf("second clean-up: %v", err)
			}
		})
	}
}

// TestDifferentCaptureRefused: a namespace holding a different capture is left untouched
// without --reconcile and replaced with it.
func TestDifferentCaptureRefused(t *testing.T) {
	l := newLab(t)
	first := base()
	if err := l.apply(first); err != nil {
		t.Fatal(err)
	}
	applied := l.ruleset(t)
	second := base()
	second.Config.OutboundPortsExclude = Ports{Items: []string{"81"}}
	err := l.apply(second)
	if err == nil || !strings.Contains(err.Error(), "--reconcile") {
		t.Fatalf("different capture: err %v, want a refusal naming --reconcile", err)
	}
	if got := l.ruleset(t); got != applied {
		t.Errorf("a refused run changed the rules:\n%s", got)
	}
	second.Reconcile = true
	if err := l.apply(second); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if got := l.ruleset(t); !strings.Contains(got, "--dport 81 -j RETURN") {
		t.Errorf("reconcile did not apply the new capture:\n%s", got)
	}
	l.listen(l.pod, 1337, "tcp:15001:envoy-out")
	l.listen(l.peer, 0, "tcp:80:peer", "tcp:81:peer")
	if got := l.dial(l.pod, appUID, "tcp", "10.99.0.1:81"); !strings.HasPrefix(got, "peer 81") {
		t.Errorf("after reconcile, port 81: %q", got)
	}
	if got := l.dial(l.pod, appUID, "tcp", "10.99.0.1:80"); !strings.HasPrefix(got, "envoy-out 15001") {
		t.Errorf("after reconcile, port 80: %q", got)
	}
}

// TestValidation runs --run-validation as the proxy uid (as the istio-validation container
// does): it passes with the capture in place and fails (exit 126 in the agent) without it.
func TestValidation(t *testing.T) {
	l := newLab(t)
	o := base()
	o.SkipRuleApply, o.RunValidation = true, true
	o.Config.ProbeTimeout = 2e9
	run := func() string {
		b, _ := jsonOptions(o)
		out, err := l.helper(l.pod, "apply", "WM_OPTS="+b, "WM_UID=1337").CombinedOutput()
		if err != nil {
			return "failed: " + string(out)
		}
		return "ok"
	}
	if got := run(); !strings.HasPrefix(got, "failed") || !strings.Contains(got, "validation") {
		t.Errorf("without the capture: %q, want a validation failure", got)
	}
	if err := l.apply(base()); err != nil {
		t.Fatal(err)
	}
	if got := run(); got != "ok" {
		t.Errorf("with the capture: %s", got)
	}
}

// TestFailedApplyLeavesNothing: when the second family fails (here ip6tables-restore meets a
// chain it must create, forced past the state check with --force-apply), the first family's
// rules, already written, are removed again.
func TestFailedApplyLeavesNothing(t *testing.T) {
	l := newLab(t)
	for _, c := range [][]string{
		{"ip6tables", "-t", "nat", "-N", "ISTIO_REDIRECT"},
		{"ip6tables", "-t", "nat", "-A", "ISTIO_REDIRECT", "-j", "RETURN"},
	} {
		if out, err := l.run(l.pod, c...); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	o := base()
	o.Config.IPv6, o.ForceApply = true, true
	if err := l.apply(o); err == nil || !strings.Contains(err.Error(), "IPv6") {
		t.Fatalf("apply: err %v, want the IPv6 restore to fail", err)
	} else {
		t.Logf("apply failed as expected: %v", err)
	}
	out, err := l.run(l.pod, "iptables-save")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "ISTIO") {
		t.Errorf("IPv4 rules left after the IPv6 failure:\n%s", out)
	}
}

// nsRunner runs commands in a namespace; restore calls fail with exit status 4 (xtables'
// resource problem) while fail4 > 0.
type nsRunner struct {
	ns    string
	fail4 int
	calls []string
}

func (r *nsRunner) Run(ctx context.Context, stdin, name string, args ...string) (string, error) {
	r.calls = append(r.calls, name)
	if strings.HasSuffix(name, "-restore") && r.fail4 > 0 {
		r.fail4--
		return "", &CmdError{Cmd: name, Code: 4, Stderr: "Another app is currently holding the xtables lock", Err: errors.New("exit status 4")}
	}
	return ExecRunner{}.Run(ctx, stdin, "ip", append([]string{"netns", "exec", r.ns, name}, args...)...)
}

// TestRestoreRetried: a restore failing with exit status 4 is tried again (with backoff) and
// the capture ends complete; other failures are not retried.
func TestRestoreRetried(t *testing.T) {
	l := newLab(t)
	r := &nsRunner{ns: l.pod, fail4: 2}
	be, err := Detect(t.Context(), r, false, "")
	if err != nil {
		t.Fatal(err)
	}
	o := base()
	p := &Programmer{Runner: r, V4: be, Log: slog.New(slog.DiscardHandler), Retries: 3, RetryDelay: time.Millisecond}
	if err := p.Apply(t.Context(), Build(&o.Config)); err != nil {
		t.Fatalf("apply with two transient failures: %v", err)
	}
	restores := 0
	for _, c := range r.calls {
		if strings.HasSuffix(c, "-restore") {
			restores++
		}
	}
	if restores != 3 {
		t.Errorf("%d restore calls, want 3 (two failures, one success)", restores)
	}
	if out, _ := l.run(l.pod, be.Save); !strings.Contains(out, "-A OUTPUT -j ISTIO_OUTPUT") {
		t.Errorf("capture not in place after retries:\n%s", out)
	}

	// Exhausted retries: an error, and nothing left behind.
	if err := p.Cleanup(t.Context(), Build(&o.Config)); err != nil {
		t.Fatal(err)
	}
	r.fail4 = 10
	if err := p.Apply(t.Context(), Build(&o.Config)); err == nil || !strings.Contains(err.Error(), "exit 4") {
		t.Fatalf("apply with persistent failures: %v", err)
	}
	if out, _ := l.run(l.pod, be.Save); strings.Contains(out, "ISTIO") {
		t.Errorf("rules left after a failed apply:\n%s", out)
	}
}
