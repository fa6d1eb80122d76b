package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemo runs the whole demo headless, as `make demo` does, and asserts every step: it
// builds the real agent and the Envoy stand-in, so that the demo cannot rot.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo builds and runs the agent; skipped with -short")
	}
	var out bytes.Buffer
	outcomes, err := Run(t.Context(), Options{StandIn: true, CertTTL: 8 * time.Second, Timeout: 100 * time.Second, Out: &out})
	var be *BuildError
	if errors.As(err, &be) && be.Pkg == "./cmd/pilot-agent" {
		t.Skipf("skipping the demo: the agent binary does not build: %v", be)
	}
	t.Logf("the demo's account:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"build", "control plane", "agent", "certificate", "envoy config", "dns", "readiness",
		"proxyless grpc", "bad resource", "rotation", "shutdown"}
	if len(outcomes) != len(want) {
		t.Fatalf("%d steps ran, want %d: %+v", len(outcomes), len(want), outcomes)
	}
	for i, o := range outcomes {
		if o.Step != want[i] {
			t.Errorf("step %d is %q, want %q", i, o.Step, want[i])
		}
		ok := o.Status == "ok" || (o.Step == "proxyless grpc" && o.Status == "skip" && !proxylessBuilt)
		if !ok {
			t.Errorf("step %q: %s %s", o.Step, o.Status, o.Detail)
		}
	}
}
