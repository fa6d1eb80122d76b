package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
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

// TestLogRotateIgnored: Istio's agent has had no --log_rotate* flags since 1.24 (#52451) and
// ignores them as unknown flags (pilot/cmd/pilot-agent/app/cmd.go FParseErrWhitelist at 1.30.3):
// Wingman accepts them too, writes nothing rotated, and says so once.
func TestLogRotateIgnored(t *testing.T) {
	fs, r := newRootFlagSet("proxy")
	if err := fs.Parse([]string{"--log_rotate=/var/log/agent.log", "--log_rotate_max_age=3"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	logs, err := r.newLogger(stdio{out: &out, err: &out})
	if err != nil {
		t.Fatal(err)
	}
	logs.Close()
	if !strings.Contains(out.String(), "\twarn\t--log_rotate* flags are ignored") {
		t.Errorf("no warning: %q", out.String())
	}
}

// TestLogFlags: the root logging flags reach the logs as Istio's (internal/istiolog has the
// format's own tests): --log_caller adds the caller column for the scopes named, or all;
// --log_as_json; --log_output_level per scope; --log_target may repeat and is not split on commas
// (a string array in Istio's pkg/log options.go at 1.30.3).
func TestLogFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		scope      string
		want, lose string
	}{
		{nil, "default", "\tinfo\thello\n", "help_test.go"},
		{[]string{"--log_caller=default"}, "default", "\tinfo\tpilot-agent/help_test.go:", ""},
		{[]string{"--log_caller=ads,all"}, "dns", "\tinfo\tdns\tpilot-agent/help_test.go:", ""},
		{[]string{"--log_caller=ads"}, "default", "\tinfo\thello", "help_test.go"},
		{[]string{"--log_as_json"}, "sds", `{"level":"info","time":"`, "\t"},
		{[]string{"--log_output_level=sds:warn"}, "sds", "", "hello"},
		{[]string{"--log_output_level=warn"}, "sds", "\tinfo\tsds\thello", ""},
		{[]string{"--log_target=stderr", "--log_target=stdout"}, "default", "\thello\n", ""},
	} {
		fs, r := newRootFlagSet("proxy")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		logs, err := r.newLogger(stdio{out: &out, err: &errb})
		if err != nil {
			t.Fatal(err)
		}
		logs.Logger(tc.scope).Info("hello")
		logs.Close()
		got := out.String()
		if !strings.Contains(got, tc.want) || (tc.lose != "" && strings.Contains(got, tc.lose)) {
			t.Errorf("%v: %q, want %q and not %q", tc.args, got, tc.want, tc.lose)
		}
		if len(tc.args) == 2 && tc.args[0] == "--log_target=stderr" && errb.String() != got {
			t.Errorf("two targets: stdout %q, stderr %q", got, errb.String())
		}
	}
	fs, r := newRootFlagSet("proxy")
	if err := fs.Parse([]string{"--log_target=a,b"}); err != nil || len(r.target) != 1 {
		t.Errorf("--log_target split on commas: %v %v", r.target, err)
	}
}

// TestCompatFlagsComplete: docs/compat.md has a row for every logging flag the root flag set
// takes, and none for a flag it does not take.
func TestCompatFlagsComplete(t *testing.T) {
	fs, _ := newRootFlagSet("pilot-agent")
	rows := map[string]bool{}
	for _, r := range options.CompatFlags {
		rows[r.Name] = true
		if fs.Lookup(strings.TrimPrefix(r.Name, "--")) == nil {
			t.Errorf("compat row %s: no such root flag", r.Name)
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !rows["--"+f.Name] {
			t.Errorf("root flag --%s has no row in options.CompatFlags", f.Name)
		}
	})
}
