package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// iptablesEnv names Istio's iptables programmer explicitly.
const iptablesEnv = "WINGMAN_ISTIO_IPTABLES"

// iptablesCandidates are where an image that swaps in Wingman keeps Istio's own programmer:
// Istio's agent beside Wingman's (it has the istio-iptables sub-command), or a standalone
// istio-iptables binary (older images).
var iptablesCandidates = []string{"/usr/local/bin/pilot-agent-istio", "/usr/local/bin/istio-iptables"}

// runIstioIptables hands `pilot-agent istio-iptables <flags>`, which the injection template's
// init container runs (installs without Istio CNI), to Istio's own implementation: Wingman does
// not program iptables itself, so the rules are exactly Istio's, for every flag and version.
// The process is replaced (exec), so the exit code and signals are the programmer's own. It
// returns only when nothing could be run.
func runIstioIptables(args, environ []string, sio stdio) int {
	argv, err := iptablesArgv(args, lookupEnv(environ, iptablesEnv))
	if err != nil {
		fmt.Fprintf(sio.err, "Error: istio-iptables: %v\n", err)
		return exitUsage
	}
	err = syscall.Exec(argv[0], argv, environ)
	fmt.Fprintf(sio.err, "Error: istio-iptables: exec %s: %v\n", argv[0], err)
	return exitFailure
}

// iptablesArgv is the command line for Istio's programmer: explicit (the env value) or the
// first candidate that exists. A standalone istio-iptables takes the flags as they are; an
// Istio pilot-agent takes them after its sub-command.
func iptablesArgv(args []string, explicit string) ([]string, error) {
	path := explicit
	if path == "" {
		for _, c := range iptablesCandidates {
			if isExecutable(c) {
				path = c
				break
			}
		}
		if path == "" {
			if p, err := exec.LookPath("istio-iptables"); err == nil {
				path = p
			}
		}
		if path == "" {
			return nil, fmt.Errorf("Wingman runs Istio's own iptables programmer and found none: "+
				"keep Istio's pilot-agent in the image as %s (or a standalone istio-iptables), "+
				"or name it with %s", iptablesCandidates[0], iptablesEnv)
		}
	} else {
		if !strings.Contains(path, "/") { // a bare name is looked up on PATH, as a shell would
			if p, err := exec.LookPath(path); err == nil {
				path = p
			}
		}
		if !isExecutable(path) {
			return nil, fmt.Errorf("%s=%q: not an executable file", iptablesEnv, explicit)
		}
	}
	if filepath.Base(path) == "istio-iptables" {
		return append([]string{path}, args...), nil
	}
	return append([]string{path, "istio-iptables"}, args...), nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// lookupEnv reads one variable from an environment list (the last setting wins, as getenv).
func lookupEnv(environ []string, name string) string {
	v := ""
	for _, kv := range environ {
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			v = kv[len(name)+1:]
		}
	}
	return v
}
