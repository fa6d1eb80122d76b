package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptyIdentityNamed: an empty SERVICE_ACCOUNT or POD_NAMESPACE stops the start (exit 2)
// with a message naming the variable and the token the CA checks it against; file-mounted
// certificates need neither.
func TestEmptyIdentityNamed(t *testing.T) {
	for _, name := range []string{"SERVICE_ACCOUNT", "POD_NAMESPACE"} {
		p := newPod(t, "", name+"=")
		code, _, stderr := p.run(t, "proxy", "sidecar")
		if code != exitUsage || !strings.Contains(stderr, name+" is empty") || !strings.Contains(stderr, "istio-token") {
			t.Errorf("%s empty: exit %d, stderr %q", name, code, stderr)
		}
		p.nothingStarted(t)
	}
}

// TestCustomSDSSocketNeedsAServer: as Istio's agent, a non-default WORKLOAD_IDENTITY_SOCKET_FILE
// must name a live SDS server's socket (SPIRE); without one the start fails naming the variable.
func TestCustomSDSSocketNeedsAServer(t *testing.T) {
	p := newPod(t, "", "WORKLOAD_IDENTITY_SOCKET_FILE=spire.sock")
	code, _, stderr := p.run(t, "proxy", "sidecar")
	if code != exitUsage || !strings.Contains(stderr, "WORKLOAD_IDENTITY_SOCKET_FILE=spire.sock") {
		t.Errorf("no socket: exit %d, stderr %q", code, stderr)
	}
	p.nothingStarted(t)

	p = newPod(t, "", "WORKLOAD_IDENTITY_SOCKET_FILE=spire.sock", "STANDIN_EXIT_CODE=0")
	dir := filepath.Join(p.dir, sdsSocketDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "spire.sock"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { l.Close(); <-done }()
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if code, _, stderr := p.run(t, "proxy", "sidecar"); strings.Contains(stderr, "WORKLOAD_IDENTITY_SOCKET_FILE") {
		t.Errorf("live socket: exit %d, stderr %q", code, stderr)
	}
}
