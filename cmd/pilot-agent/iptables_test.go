package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeProgrammer writes an executable that records its pid, arguments and one variable of its
// environment, then exits 7.
func fakeProgrammer(t *testing.T, name string) (path, record string) {
	t.Helper()
	dir := t.TempDir()
	path, record = filepath.Join(dir, name), filepath.Join(dir, "record")
	script := "#!/bin/sh\n{ echo $$; echo \"$ISTIO_META_DNS_CAPTURE\"; for a in \"$@\"; do echo \"[$a]\"; done; } > " + record + "\nexit 7\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, record
}

func runAgent(t *testing.T, env []string, args ...string) (*exec.Cmd, int, string) {
	t.Helper()
	c := exec.Command(agentBin, args...)
	c.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var errb strings.Builder
	c.Stderr = &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return c, code, errb.String()
}

// injectorArgs are the init container's arguments in Istio's injection template.
var injectorArgs = []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT",
	"-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020", "--log_output_level=default:info"}

func TestIstioIptablesExecsIstiosAgent(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string // arguments the programmer sees
	}{
		{"pilot-agent-istio", append([]string(nil), injectorArgs...)},  // Istio's agent: its sub-command first
		{"istio-iptables", append([]string(nil), injectorArgs[1:]...)}, // standalone: the flags only
	} {
		path, record := fakeProgrammer(t, tc.name)
		c, code, stderr := runAgent(t, []string{iptablesEnv + "=" + path, "ISTIO_META_DNS_CAPTURE=true"}, injectorArgs...)
		if code != 7 {
			t.Fatalf("%s: exit %d, want the programmer's 7; stderr: %s", tc.name, code, stderr)
		}
		b, err := os.ReadFile(record)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if pid, _ := strconv.Atoi(lines[0]); pid != c.Process.Pid {
			t.Errorf("%s: ran as pid %d, not in place of the agent (%d)", tc.name, pid, c.Process.Pid)
		}
		if lines[1] != "true" {
			t.Errorf("%s: environment not passed: ISTIO_META_DNS_CAPTURE=%q", tc.name, lines[1])
		}
		var got []string
		for _, l := range lines[2:] {
			got = append(got, strings.TrimSuffix(strings.TrimPrefix(l, "["), "]"))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: arguments\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestIstioIptablesWithoutProgrammer(t *testing.T) {
	_, code, stderr := runAgent(t, []string{iptablesEnv + "=/nonexistent/pilot-agent"}, injectorArgs...)
	if code != exitUsage || !strings.Contains(stderr, iptablesEnv+`="/nonexistent/pilot-agent"`) {
		t.Errorf("named but missing: exit %d, stderr %q", code, stderr)
	}
	for _, c := range iptablesCandidates {
		if isExecutable(c) {
			t.Skipf("%s exists on this machine", c)
		}
	}
	_, code, stderr = runAgent(t, nil, injectorArgs...)
	if code != exitUsage || !strings.Contains(stderr, iptablesEnv) || !strings.Contains(stderr, iptablesCandidates[0]) {
		t.Errorf("none found: exit %d, stderr %q", code, stderr)
	}
}

// TestIstioIptablesOnPath: with no programmer at the image's paths, an istio-iptables on PATH
// is used, found by default or named bare in WINGMAN_ISTIO_IPTABLES.
func TestIstioIptablesOnPath(t *testing.T) {
	for _, c := range iptablesCandidates {
		if isExecutable(c) {
			t.Skipf("%s exists on this machine", c)
		}
	}
	path, record := fakeProgrammer(t, "istio-iptables")
	for _, env := range [][]string{nil, {iptablesEnv + "=istio-iptables"}} {
		os.Remove(record)
		env = append(env, "PATH="+filepath.Dir(path)+":/usr/bin:/bin")
		if _, code, stderr := runAgent(t, env, injectorArgs...); code != 7 {
			t.Fatalf("%v: exit %d, want the programmer's 7; stderr: %s", env, code, stderr)
		}
		if _, err := os.Stat(record); err != nil {
			t.Fatalf("%v: the programmer on PATH did not run", env)
		}
	}
}
