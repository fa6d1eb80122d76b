package main

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/lab/meshlab"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemo runs the whole demo headless, as `make demo` does, and asserts every step: it
// builds the real agent and the Envoy stand-in, so that the demo cannot rot.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo builds and runs the agent; skipped with -short")
	}
	var out bytes.Buffer
	outcomes, err := Run(t.Context(), Options{StandIn: true, CertTTL: 8 * time.Second, Timeout: 100 * time.Second, Out: &out, TempDir: shortTempDir(t)})
	var be *BuildError
	if errors.As(err, &be) && be.Pkg == "./cmd/pilot-agent" {
		t.Skipf("skipping the demo: the agent binary does not build: %v", be)
	}
	t.Logf("the demo's account:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"build", "control plane", "agent", "certificate", "envoy config", "dns", "readiness",
		"proxyless grpc", "bad resource", "wasm", "rotation", "shutdown"}
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

// TestResources: the demo's resource templates render to a folder meshlab accepts, with the
// expected resources for each kind of client.
func TestResources(t *testing.T) {
	dir := t.TempDir()
	m := newMesh(namespace, "spiffe://cluster.local/ns/demo/sa/demo-sa", []int{7001, 7002, 7003})
	if err := writeResources(dir, m); err != nil {
		t.Fatal(err)
	}
	set, err := meshlab.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		aud       meshlab.Audience
		typeURL   string
		wantNames []string
	}{
		{meshlab.GRPC, fastpath.ListenerType, []string{"alpha.demo.svc.cluster.local:7070", "beta.demo.svc.cluster.local:7070",
			"xds.istio.io/grpc/lds/inbound/127.0.0.1:7001", "xds.istio.io/grpc/lds/inbound/127.0.0.1:7002"}},
		{meshlab.Envoy, fastpath.ListenerType, []string{"127.0.0.1_7003"}},
		{meshlab.Envoy, fastpath.ClusterType, []string{"outbound|7070||alpha.demo.svc.cluster.local", "outbound|7070||beta.demo.svc.cluster.local"}},
		{meshlab.GRPC, fastpath.EndpointType, []string{"outbound|7070||alpha.demo.svc.cluster.local", "outbound|7070||beta.demo.svc.cluster.local"}},
		{meshlab.Envoy, fastpath.NameTableType, []string{""}},
	} {
		var got []string
		for name := range set.Resources(tc.aud, tc.typeURL) {
			got = append(got, name)
		}
		sort.Strings(got)
		if !slices.Equal(got, tc.wantNames) {
			t.Errorf("%s %s: got %q, want %q", tc.aud, tc.typeURL, got, tc.wantNames)
		}
	}
}

// TestDemoNamesFailedStep: an "agent" that exits at once fails the certificate step, the
// error names it, and the shutdown step still runs.
func TestDemoNamesFailedStep(t *testing.T) {
	var out bytes.Buffer
	outcomes, err := Run(t.Context(), Options{Agent: "/bin/false", Envoy: "/bin/true", Timeout: 30 * time.Second, Out: &out, TempDir: shortTempDir(t)})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "certificate" {
		t.Fatalf("got %v, want a StepError for step certificate; account:\n%s", err, out.String())
	}
	last := outcomes[len(outcomes)-1]
	if last.Step != "shutdown" || last.Status != "FAIL" || !strings.Contains(last.Detail, "exited 1") {
		t.Errorf("shutdown outcome %+v, want a failure reporting exit 1", last)
	}
	if !strings.Contains(out.String(), "FAILED: step certificate") {
		t.Errorf("the account does not name the failed step:\n%s", out.String())
	}
}

// shortTempDir is a temporary directory with a short path (t.TempDir's paths, with the test's
// name, can push the agent's socket paths past the 107-byte limit), removed after the test.
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "wd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestReadinessReasonsWhole: the reasons the agent was not ready are printed whole, however
// long (they were cut at 110 bytes, mid-path).
func TestReadinessReasonsWhole(t *testing.T) {
	long := "503 not ready: workload certificate not yet written to /tmp/wingman-demo-123456/etc/certs/cert-chain.pem; Envoy has not yet received CDS and LDS from istiod"
	s := readinessAccount("http://127.0.0.1:15021/healthz/ready", 1500*time.Millisecond, []string{"no answer yet (connection refused)", long, "503 a\nb"})
	for _, want := range []string{"before that: no answer yet (connection refused)", "then " + long + "\n", "then 503 a b"} {
		if !strings.Contains(s+"\n", want) {
			t.Errorf("account lacks %q:\n%s", want, s)
		}
	}
}
