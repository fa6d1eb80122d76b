package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// subCommands are the commands run dispatches (main.go); help must list and explain each.
var subCommands = []string{"proxy", "bootstrap", "request", "wait", "version", "istio-iptables", "help"}

// TestEverySubCommandHasHelp: root usage lists every sub-command, `help <cmd>` and `<cmd> --help`
// explain each and exit 0, and the exit-code rule is printed with them.
func TestEverySubCommandHasHelp(t *testing.T) {
	help := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, nil, &out, &errb)
		return code, out.String() + errb.String()
	}
	code, root := help("--help")
	if code != 0 || !strings.Contains(root, "Exit codes (every command):") {
		t.Fatalf("root help: exit %d\n%s", code, root)
	}
	for _, cmd := range subCommands {
		if !strings.Contains(root, "\n  "+cmd+" ") && !strings.Contains(root, "\n  "+cmd+"\n") {
			t.Errorf("root help does not list %s", cmd)
		}
		code, out := help("help", cmd)
		if code != 0 || len(out) < 40 {
			t.Errorf("help %s: exit %d, %q", cmd, code, out)
		}
		if cmd == "help" {
			continue // `help --help` is root help
		}
		code, out = help(cmd, "--help")
		if code != 0 || !strings.Contains(out, "Exit codes") {
			t.Errorf("%s --help: exit %d, lacks the exit codes:\n%s", cmd, code, out)
		}
	}
	if code, _ := help("help", "frobnicate"); code != exitUsage {
		t.Errorf("help frobnicate: exit %d, want %d", code, exitUsage)
	}
}

// TestLogRotateRefused: Istio's --log_rotate writes a rotating log file and --log_stacktrace_level
// adds stack traces; Wingman refuses both at start (exit 2) rather than accept them and do nothing.
func TestLogRotateRefused(t *testing.T) {
	p := newPod(t, "")
	for _, flag := range []string{"--log_rotate=/var/log/agent.log", "--log_stacktrace_level=default:error"} {
		code, _, stderr := p.run(t, "proxy", "sidecar", flag)
		name, _, _ := strings.Cut(flag, "=")
		if code != exitUsage || !strings.Contains(stderr, name) || !strings.Contains(stderr, "not supported yet") {
			t.Errorf("%s: exit %d, stderr %q", flag, code, stderr)
		}
		p.nothingStarted(t)
	}
}

// TestLogCaller: --log_caller=default adds the source location to every record, as Istio's.
func TestLogCaller(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want bool
	}{{"", false}, {"default", true}, {"ads,all", true}, {"ads", false}} {
		fs, r := newRootFlagSet("proxy")
		if err := fs.Parse([]string{"--log_caller=" + tc.spec}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		log, closeLog, err := r.newLogger(stdio{out: &out, err: &out})
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello")
		closeLog()
		if got := strings.Contains(out.String(), "source="); got != tc.want {
			t.Errorf("--log_caller=%q: source shown %v, want %v: %s", tc.spec, got, tc.want, out.String())
		}
	}
}
