package dnsrig

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/wingman-mesh/wingman/internal/ndspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartAndLookup: before a NameTable the proxy answers a mesh name SERVFAIL (it forwards
// nothing: its upstream refuses), after one the table's address.
func TestStartAndLookup(t *testing.T) {
	d, addr := Start(t)
	const name = "productpage.ns.svc.cluster.local"
	if got := LookupA(t, addr, name+"."); got != "SERVFAIL" {
		t.Fatalf("before a table: %s, want SERVFAIL", got)
	}
	raw, err := (&ndspb.NameTable{Table: map[string]*ndspb.NameTable_NameInfo{
		name: {Ips: []string{"10.0.0.7"}, Registry: "Kubernetes", Shortname: "productpage", Namespace: "ns"},
	}}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.UpdateNameTable(raw); err != nil {
		t.Fatal(err)
	}
	if got := LookupA(t, addr, name+"."); got != "10.0.0.7" {
		t.Fatalf("after a table: %s, want 10.0.0.7", got)
	}
}
