package laststate

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/wingman-mesh/wingman/dns"
	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/internal/ndspb"
	"github.com/wingman-mesh/wingman/lab/dnsrig"
	"github.com/wingman-mesh/wingman/mux"
)

const meshHost = "productpage.ns.svc.cluster.local"

func meshTable(ip string) *ndspb.NameTable {
	return &ndspb.NameTable{Table: map[string]*ndspb.NameTable_NameInfo{
		meshHost: {Ips: []string{ip}, Registry: "Kubernetes", Shortname: "productpage", Namespace: "ns"},
	}}
}

// ndsHandler is the agent's NDS handler as cmd/pilot-agent wires it (nameTableHandler): the
// table to the DNS proxy, then, taken, to the recorder; each table taken is reported on applied
// with the bytes the handler got.
type ndsHandler struct {
	mu      sync.Mutex
	d       *dns.Server // guarded by mu: the run's DNS proxy
	applied chan []byte
}

func (h *ndsHandler) types(rec *Recorder) map[string]mux.Handler {
	return map[string]mux.Handler{fastpath.NameTableType: func(res [][]byte) error {
		h.mu.Lock()
		d := h.d
		h.mu.Unlock()
		if err := d.UpdateNameTable(res[0]); err != nil {
			return err
		}
		rec.NameTable(res[0])
		h.applied <- bytes.Clone(res[0])
		return nil
	}}
}

func (h *ndsHandler) use(d *dns.Server) {
	h.mu.Lock()
	h.d = d
	h.mu.Unlock()
}

// TestRestoreNameTableHandsOver: through the real proxy and an Istiod stand-in serving NDS, run 1
// records the NameTable the agent's handler took, as Istiod sent it; the agent restarts with
// Istiod down and its DNS proxy, given the snapshot's table before the proxy serves (as
// cmd/pilot-agent's lastState does), answers a mesh name from it; Istiod comes back with another
// table: the proxy subscribes NDS again, the handler replaces the restored table (the answer
// changes) and the snapshot is rewritten with it. Expected addresses are the ones the test put
// in each table.
func TestRestoreNameTableHandsOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := shmDir(t)
	w := newWorld(t, fastpath.NameTableType)
	h := &ndsHandler{applied: make(chan []byte, 16)}
	w.agentTypes = h.types
	w.cp.Cache(fastpath.ClusterType).SetResources(clustersOf(3, 3<<10, 1))
	w.cp.Cache(fastpath.ListenerType).SetResources(map[string]types.Resource{})
	// Each table is served before the proxy subscribes NDS: go-control-plane answers a
	// subscription of an empty cache with an empty response, which the agent, as Istio's, does
	// not ACK, and then holds the type's later pushes back.
	w.cp.Cache(fastpath.NameTableType).SetResources(map[string]types.Resource{"": meshTable("10.0.0.1")})
	waitApplied := func() []byte {
		t.Helper()
		select {
		case b := <-h.applied:
			return b
		case <-ctx.Done():
			t.Fatal("no NameTable reached the agent's handler")
			return nil
		}
	}

	// Run 1: Istiod up. The proxy subscribes NDS after the client's first listener request.
	d1, addr1 := dnsrig.Start(t)
	h.use(d1)
	r1 := w.start(t, dir, nil, nil)
	c1 := dial(t, ctx, r1.sock, false)
	c1.subscribe(fastpath.ClusterType)
	c1.mustRecv(fastpath.ClusterType)
	c1.subscribe(fastpath.ListenerType)
	took := waitApplied()
	if got := dnsrig.LookupA(t, addr1, meshHost+"."); got != "10.0.0.1" {
		t.Fatalf("run 1: %s", got)
	}
	waitSnapshot(ctx, t, r1, dir, func(s *Snapshot) bool { // s is closed: its table is read below
		return s.NameTable != nil && versions(s, false)[fastpath.ClusterType] == "cds-1"
	})
	snap, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	if b, err := snap.ReadNameTable(); err != nil || !bytes.Equal(b, took) {
		t.Fatalf("the snapshot's name table is not the bytes the handler took: %v", err)
	}
	r1.stop()

	// Istiod goes away; the agent starts again: its DNS proxy has no table until the restore.
	w.cp.Stop()
	if err := snap.Check(testID, time.Now()); err != nil {
		t.Fatal(err)
	}
	d2, addr2 := dnsrig.Start(t)
	h.use(d2)
	if got := dnsrig.LookupA(t, addr2, meshHost+"."); got != "SERVFAIL" {
		t.Fatalf("restarted, before the restore: %s", got)
	}
	table, err := snap.ReadNameTable()
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.UpdateNameTable(table); err != nil {
		t.Fatal(err)
	}
	r2 := w.start(t, dir, func(reg *metric.Registry) mux.Restorer { return NewSource(snap, reg, nil) }, snap)
	if got := dnsrig.LookupA(t, addr2, meshHost+"."); got != "10.0.0.1" {
		t.Fatalf("restored: %s, want the snapshot's 10.0.0.1", got)
	}
	c2 := dial(t, ctx, r2.sock, false)
	c2.subscribe(fastpath.ClusterType)
	c2.mustRecv(fastpath.ClusterType)
	c2.subscribe(fastpath.ListenerType)

	// Istiod comes back with another table: it reaches the handler and replaces the restored one.
	w.cp.Cache(fastpath.NameTableType).SetResources(map[string]types.Resource{"": meshTable("10.0.0.2")})
	if err := w.cp.Start(w.addr); err != nil {
		t.Fatal(err)
	}
	for {
		waitApplied()
		if got := dnsrig.LookupA(t, addr2, meshHost+"."); got == "10.0.0.2" {
			break
		} else if got != "10.0.0.1" {
			t.Fatalf("after Istiod's table: %s", got)
		}
	}
	waitSnapshot(ctx, t, r2, dir, func(s *Snapshot) bool {
		if s.NameTable == nil {
			return false
		}
		s2, err := Load(dir, 0) // s is closed: its table is read from the file again
		if err != nil {
			return false
		}
		defer s2.Close()
		b, err := s2.ReadNameTable()
		if err != nil {
			return false
		}
		nt := &ndspb.NameTable{}
		return nt.UnmarshalVT(b) == nil && len(nt.Table[meshHost].GetIps()) == 1 && nt.Table[meshHost].Ips[0] == "10.0.0.2"
	})
}
