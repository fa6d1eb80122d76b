package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/internal/ndspb"
	"github.com/wingman-mesh/wingman/lab/dnsrig"
	"github.com/wingman-mesh/wingman/laststate"
)

// meshName is the Kubernetes service the test's NameTables name (in the agent's namespace).
const meshName = "productpage.ns.svc.cluster.local."

// nameTable is the bytes of a NameTable, as Istiod sends it in an NDS response's resource,
// giving meshName the address ip.
func nameTable(t *testing.T, ip string) []byte {
	t.Helper()
	raw, err := (&ndspb.NameTable{Table: map[string]*ndspb.NameTable_NameInfo{
		strings.TrimSuffix(meshName, "."): {Ips: []string{ip}, Registry: "Kubernetes", Shortname: "productpage", Namespace: "ns"},
	}}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestLastStateRestoresNameTable (issue 31, DNS proxying): the NameTable the agent's NDS handler
// accepted is in the snapshot as the bytes Istiod sent (one the DNS proxy refuses is not); an
// agent restarted with Istiod down gives it to its DNS proxy before the xDS proxy serves
// anything, so a real DNS query for a mesh name is answered from it (without it: SERVFAIL, no
// table, as Istio's agent answers before its first NDS response), and readiness, which waits for
// a table, holds. When Istiod is back its NameTable, through the same handler, replaces the
// restored one and the snapshot.
func TestLastStateRestoresNameTable(t *testing.T) {
	dir := shm(t)
	a, m, out := lastStateAgent(t, dir, dnsrig.RefusedAddr(t), []string{"WINGMAN_LAST_STATE=true"})
	id := laststate.Identity{NodeID: a.nodeID(), Namespace: "ns", ServiceAccount: "app", TrustDomain: "cluster.local"}
	before, after := nameTable(t, "10.0.0.1"), nameTable(t, "10.0.0.2")

	// Run 1, Istiod up: its NameTable reaches the DNS proxy through the handler the xDS proxy is
	// given, which tells the recorder; a table the DNS proxy refuses is NACKed, not recorded.
	d1, addr1 := dnsrig.Start(t)
	writeSnapshotWith(t, a, dir, id, func(rec *laststate.Recorder) {
		h := a.agentTypes(nil, d1, lastStateParts{rec: rec})[fastpath.NameTableType]
		if err := h([][]byte{bytes.Clone(before)}); err != nil {
			t.Fatal(err)
		}
		if err := h([][]byte{{0xff, 0xff}}); err == nil {
			t.Fatal("a malformed NameTable accepted")
		}
	})
	if got := dnsrig.LookupA(t, addr1, meshName); got != "10.0.0.1" {
		t.Fatalf("run 1 answer %s, want 10.0.0.1", got)
	}
	snap, err := laststate.Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := snap.ReadNameTable()
	snap.Close()
	if err != nil || !bytes.Equal(got, before) {
		t.Fatalf("the snapshot's name table is not the bytes the handler got: %v", err)
	}

	// Run 2, Istiod down: the restarted agent's DNS proxy has no table until the restore.
	d, addr := dnsrig.Start(t)
	if got := dnsrig.LookupA(t, addr, meshName); got != "SERVFAIL" || d.Ready() {
		t.Fatalf("before the restore: answer %s, ready %v; want SERVFAIL, not ready", got, d.Ready())
	}
	reg := metric.NewRegistry()
	ls := a.lastState(reg, m, d)
	if ls.restore == nil {
		t.Fatalf("not restored; log:\n%s", out.String())
	}
	t.Cleanup(ls.restore.Live) // releases the snapshot file
	if got := dnsrig.LookupA(t, addr, meshName); got != "10.0.0.1" || !d.Ready() {
		t.Fatalf("restored: answer %s, ready %v; want the snapshot's 10.0.0.1, ready", got, d.Ready())
	}
	if n := strings.Count(out.String(), "serving the last-state snapshot until Istiod answers"); n != 1 ||
		!strings.Contains(out.String(), `dns_name_table="restored (`) {
		t.Fatalf("want one restore line naming the DNS name table; log:\n%s", out.String())
	}

	// Istiod is back: its NameTable goes through the agent's handler, replaces the restored table
	// and is what the snapshot holds next.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ls.rec.Run(rctx) }()
	defer func() { stop(); <-done }()
	h := a.agentTypes(m, d, ls)[fastpath.NameTableType]
	if err := h([][]byte{bytes.Clone(after)}); err != nil {
		t.Fatal(err)
	}
	if got := dnsrig.LookupA(t, addr, meshName); got != "10.0.0.2" {
		t.Fatalf("after Istiod's NameTable: answer %s, want 10.0.0.2", got)
	}
	for {
		_, next := ls.rec.Written()
		if s, err := laststate.Load(dir, 0); err == nil {
			b, err := s.ReadNameTable()
			s.Close()
			if err == nil && bytes.Equal(b, after) {
				break
			}
		}
		select {
		case <-next:
		case <-ctx.Done():
			t.Fatal("the snapshot never held Istiod's new name table")
		}
	}
}
