package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/wingman-mesh/wingman/dns"
	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/internal/ndspb"
	"github.com/wingman-mesh/wingman/laststate"
)

// refusedAddr is a loopback port with nothing listening: a dial to it is refused.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

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

// dnsProxy runs the agent's real DNS proxy on a free loopback port until the test ends (its
// upstream a refused port: nothing in these tests is forwarded), and returns it with its address.
func dnsProxy(t *testing.T) (*dns.Server, string) {
	t.Helper()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+refusedAddr(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := dns.New(dns.Config{Addr: "127.0.0.1:0", ResolvConf: resolv, Namespace: "ns", Domain: "ns.svc.cluster.local", ForwardTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dns: %v", err)
		}
	})
	select {
	case <-d.Bound():
	case err := <-done:
		t.Fatalf("dns: %v", err)
	}
	return d, d.Addrs()[0].String()
}

// resolve asks the DNS proxy at addr for meshName's A record over UDP with miekg/dns, as a
// resolver in the pod would: the address answered, or the rcode's name when there is none.
func resolve(t *testing.T, addr string) string {
	t.Helper()
	q := new(mdns.Msg)
	q.SetQuestion(meshName, mdns.TypeA)
	r, _, err := (&mdns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(q, addr)
	if err != nil {
		t.Fatalf("query %s: %v", meshName, err)
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*mdns.A); ok {
			return a.A.String()
		}
	}
	return mdns.RcodeToString[r.Rcode]
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
	a, m, out := lastStateAgent(t, dir, refusedAddr(t), []string{"WINGMAN_LAST_STATE=true"})
	id := laststate.Identity{NodeID: a.nodeID(), Namespace: "ns", ServiceAccount: "app", TrustDomain: "cluster.local"}
	before, after := nameTable(t, "10.0.0.1"), nameTable(t, "10.0.0.2")

	// Run 1, Istiod up: its NameTable reaches the DNS proxy through the handler the xDS proxy is
	// given, which tells the recorder; a table the DNS proxy refuses is NACKed, not recorded.
	d1, addr1 := dnsProxy(t)
	writeSnapshotWith(t, a, dir, id, func(rec *laststate.Recorder) {
		h := a.agentTypes(nil, d1, lastStateParts{rec: rec})[fastpath.NameTableType]
		if err := h([][]byte{bytes.Clone(before)}); err != nil {
			t.Fatal(err)
		}
		if err := h([][]byte{{0xff, 0xff}}); err == nil {
			t.Fatal("a malformed NameTable accepted")
		}
	})
	if got := resolve(t, addr1); got != "10.0.0.1" {
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
	d, addr := dnsProxy(t)
	if got := resolve(t, addr); got != "SERVFAIL" || d.Ready() {
		t.Fatalf("before the restore: answer %s, ready %v; want SERVFAIL, not ready", got, d.Ready())
	}
	reg := metric.NewRegistry()
	ls := a.lastState(reg, m, d)
	if ls.restore == nil {
		t.Fatalf("not restored; log:\n%s", out.String())
	}
	t.Cleanup(ls.restore.Live) // releases the snapshot file
	if got := resolve(t, addr); got != "10.0.0.1" || !d.Ready() {
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
	if got := resolve(t, addr); got != "10.0.0.2" {
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
