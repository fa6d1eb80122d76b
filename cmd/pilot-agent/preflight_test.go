package main

import (
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
