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
		if cmd == "istio-iptables" || cmd == "help" {
			continue // --help goes to Istio's programmer; `help --help` is root help
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

// TestLogRotateRefused: Istio's --log_rotate writes a rotating log file; Wingman refuses it at
// start (exit 2) rather than accept it and write no file.
func TestLogRotateRefused(t *testing.T) {
	p := newPod(t, "")
	code, _, stderr := p.run(t, "proxy", "sidecar", "--log_rotate=/var/log/agent.log")
	if code != exitUsage || !strings.Contains(stderr, "--log_rotate") || !strings.Contains(stderr, "not supported yet") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	p.nothingStarted(t)
}
