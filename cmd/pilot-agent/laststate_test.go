package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "istio.io/api/security/v1alpha1"

	"github.com/wingman-mesh/wingman/certs"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/node"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/internal/syncbuf"
	"github.com/wingman-mesh/wingman/lab/dnsrig"
	"github.com/wingman-mesh/wingman/lab/testca"
	"github.com/wingman-mesh/wingman/laststate"
	"github.com/wingman-mesh/wingman/mux"
)

// lastStateAgent is an agent of pod app-1 in ns (service account app) whose proxy directory is
// dir and whose Istiod is at addr, with its real secret manager (CA at addr too).
func lastStateAgent(t *testing.T, dir, addr string, environ []string) (*agent, *certs.Manager, *syncbuf.Buffer) {
	t.Helper()
	env, err := options.Parse(append([]string{"POD_NAME=app-1", "POD_NAMESPACE=ns", "SERVICE_ACCOUNT=app", "INSTANCE_IP=10.0.0.1"}, environ...))
	if err != nil {
		t.Fatal(err)
	}
	var out syncbuf.Buffer
	a := &agent{env: env, log: slog.New(slog.NewTextHandler(&out, nil)),
		identity: node.Identity{Type: "sidecar", IPs: []string{"10.0.0.1"}, ID: "app-1.ns", DNSDomain: "ns.svc.cluster.local"}}
	a.settings = defaultSettings()
	a.settings.ConfigPath, a.settings.DiscoveryAddress = dir, addr
	m, err := certs.NewManager(certs.Config{TrustDomain: env.TrustDomain, Namespace: "ns", ServiceAccount: "app", CAAddr: addr, KeyType: certs.KeyECDSA})
	if err != nil {
		t.Fatal(err)
	}
	return a, m, &out
}

// writeSnapshot writes, through the recorder, a snapshot for a's identity holding one CDS
// response, with a workload certificate lab/testca signed for id's SPIFFE identity.
func writeSnapshot(t *testing.T, a *agent, dir string, id laststate.Identity) {
	t.Helper()
	writeSnapshotWith(t, a, dir, id, nil)
}

// writeSnapshotWith is writeSnapshot; before, when set, hears the recorder before it runs (what
// it is handed then is in the snapshot written).
func writeSnapshotWith(t *testing.T, a *agent, dir string, id laststate.Identity, before func(*laststate.Recorder)) {
	t.Helper()
	ca, err := testca.New(testca.Config{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	u := &url.URL{Scheme: "spiffe", Host: id.TrustDomain, Path: "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount}
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	resp, err := ca.CreateCertificate(context.Background(), &pb.IstioCertificateRequest{Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	chain := resp.GetCertChain()
	c := laststate.Certs{Chain: []byte(strings.Join(chain[:len(chain)-1], "")), Roots: []byte(chain[len(chain)-1]),
		Key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})}
	rec, err := laststate.NewRecorder(laststate.RecorderConfig{Dir: dir, Identity: id, Certs: func() (laststate.Certs, bool) { return c, true }})
	if err != nil {
		t.Fatal(err)
	}
	cds := fastpath.AppendResponse(nil, []byte("cds-7"), fastpath.ClusterType, "n7",
		[][]byte{fastpath.AppendResource(nil, fastpath.ClusterType, []byte("\x0a\x01c"))})
	if err := rec.Seed(&laststate.Snapshot{Streams: []laststate.Stream{{NodeID: id.NodeID, Responses: []laststate.Response{{TypeURL: fastpath.ClusterType, Version: "cds-7", Data: cds}}}}}); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(rec)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	_, next := rec.Written()
	rec.CertsChanged()
	<-next
	cancel()
	<-done
}

func shm(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "wingman-laststate-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := laststate.CheckTmpfs(dir); err != nil {
		t.Skip(err)
	}
	return dir
}

// TestLastStateRestoresWithoutIstiod: with WINGMAN_LAST_STATE=true, the agent restores its own
// snapshot when Istiod's address refuses the dial (the restored certificate in service, the
// metric at 1, one log line naming age and versions), and does not restore it when Istiod
// answers, nor a snapshot of another workload.
func TestLastStateRestoresWithoutIstiod(t *testing.T) {
	refused := func() string { return dnsrig.RefusedAddr(t) }
	on := []string{"WINGMAN_LAST_STATE=true"}
	t.Run("istiod down", func(t *testing.T) {
		dir := shm(t)
		a, m, out := lastStateAgent(t, dir, refused(), on)
		id := laststate.Identity{NodeID: a.nodeID(), Namespace: "ns", ServiceAccount: "app", TrustDomain: "cluster.local"}
		writeSnapshot(t, a, dir, id)
		reg := metric.NewRegistry()
		ls := a.lastState(reg, m, nil)
		if ls.rec == nil || ls.restore == nil {
			t.Fatalf("not restored; log:\n%s", out.String())
		}
		if _, _, _, ok := m.Current(); !ok {
			t.Fatal("the restored certificate is not in service")
		}
		if v, _ := reg.Value("istio_agent_wingman_last_state_serving_restored"); v != 1 {
			t.Fatalf("serving_restored = %v", v)
		}
		got := ls.restore.Responses(false, id.NodeID, fastpath.ClusterType)
		if len(got) != 1 {
			t.Fatalf("restored CDS responses: %d", len(got))
		}
		got[0].Release()
		if n := strings.Count(out.String(), "serving the last-state snapshot until Istiod answers"); n != 1 || !strings.Contains(out.String(), "Cluster=cds-7") {
			t.Fatalf("want one log line naming the versions; log:\n%s", out.String())
		}
	})
	t.Run("istiod up", func(t *testing.T) {
		dir := shm(t)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		a, m, out := lastStateAgent(t, dir, l.Addr().String(), on)
		writeSnapshotWith(t, a, dir, laststate.Identity{NodeID: a.nodeID(), Namespace: "ns", ServiceAccount: "app", TrustDomain: "cluster.local"},
			func(rec *laststate.Recorder) { rec.NameTable(nameTable(t, "10.0.0.1")) })
		d, _ := dnsrig.Start(t)
		if ls := a.lastState(metric.NewRegistry(), m, d); ls.rec == nil || ls.restore != nil {
			t.Fatalf("recorder %v, restored %v with Istiod up; log:\n%s", ls.rec != nil, ls.restore != nil, out.String())
		}
		if d.Ready() {
			t.Fatal("the snapshot's name table given to the DNS proxy with Istiod up")
		}
	})
	t.Run("format 1", func(t *testing.T) {
		// A snapshot of the format before the NameTable record (format 2) is refused whole, with
		// one warning naming both formats; nothing of it is served.
		dir := shm(t)
		a, m, out := lastStateAgent(t, dir, refused(), on)
		writeSnapshot(t, a, dir, laststate.Identity{NodeID: a.nodeID(), Namespace: "ns", ServiceAccount: "app", TrustDomain: "cluster.local"})
		path := filepath.Join(dir, laststate.FileName)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len("WMLSTATE")] = 1
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if ls := a.lastState(metric.NewRegistry(), m, nil); ls.restore != nil {
			t.Fatal("a format-1 snapshot restored")
		}
		if _, _, _, ok := m.Current(); ok {
			t.Fatal("a format-1 snapshot's certificate in service")
		}
		if n := strings.Count(out.String(), "level=WARN"); n != 1 || !strings.Contains(out.String(), "format 1, this agent reads only format 2") {
			t.Fatalf("want one warning naming both formats; log:\n%s", out.String())
		}
	})
	t.Run("foreign", func(t *testing.T) {
		dir := shm(t)
		a, m, out := lastStateAgent(t, dir, refused(), on)
		writeSnapshot(t, a, dir, laststate.Identity{NodeID: "sidecar~10.0.0.2~app-2.ns~ns.svc.cluster.local", Namespace: "ns", ServiceAccount: "app", TrustDomain: "cluster.local"})
		if ls := a.lastState(metric.NewRegistry(), m, nil); ls.restore != nil {
			t.Fatal("another pod's snapshot restored")
		}
		if _, _, _, ok := m.Current(); ok {
			t.Fatal("another pod's certificate in service")
		}
		if n := strings.Count(out.String(), "level=WARN"); n != 1 || !strings.Contains(out.String(), "another workload") {
			t.Fatalf("want one warning saying why; log:\n%s", out.String())
		}
	})
}

// TestLastStateOffByDefault: without the setting nothing is recorded, restored or hooked into
// the proxy, even with a valid snapshot of this pod in place and Istiod down; on a directory
// that is not a tmpfs the setting is refused, naming it.
func TestLastStateOffByDefault(t *testing.T) {
	dir := shm(t)
	a, m, out := lastStateAgent(t, dir, "127.0.0.1:1", nil)
	if a.env.LastState {
		t.Fatal("WINGMAN_LAST_STATE on by default")
	}
	on, _, _ := lastStateAgent(t, dir, "127.0.0.1:1", []string{"WINGMAN_LAST_STATE=true"})
	writeSnapshot(t, on, dir, laststate.Identity{NodeID: a.nodeID(), Namespace: "ns", ServiceAccount: "app", TrustDomain: "cluster.local"})
	ls := a.lastState(metric.NewRegistry(), m, nil)
	var cfg mux.Config
	ls.apply(&cfg)
	if ls.rec != nil || ls.restore != nil || cfg.Recorder != nil || cfg.Restore != nil || ls.service(m) != nil {
		t.Fatal("last-state parts built with the setting off")
	}
	if _, _, _, ok := m.Current(); ok || out.String() != "" {
		t.Fatalf("the setting off changed something: certificate %v, log %q", ok, out.String())
	}

	disk := t.TempDir()
	if laststate.CheckTmpfs(disk) == nil {
		t.Skip("the test's temporary directory is a tmpfs")
	}
	b, m2, out2 := lastStateAgent(t, disk, "127.0.0.1:1", []string{"WINGMAN_LAST_STATE=true"})
	if ls := b.lastState(metric.NewRegistry(), m2, nil); ls.rec != nil || ls.restore != nil {
		t.Fatal("last state kept on a directory that is not a tmpfs")
	}
	if !strings.Contains(out2.String(), disk) || !strings.Contains(out2.String(), "not on a tmpfs") {
		t.Fatalf("the refusal does not name the directory; log:\n%s", out2.String())
	}
}
