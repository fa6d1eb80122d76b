// Package dnsrig runs the agent's real DNS proxy (dns.Server) for tests, on a free loopback
// port with an upstream that refuses (nothing a test asks is forwarded), and asks it questions
// over UDP with miekg/dns, as a resolver in the pod would.
package dnsrig

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/wingman-mesh/wingman/dns"
)

// Start runs a DNS proxy for namespace "ns" (domain ns.svc.cluster.local) until the test ends,
// and returns it with its address once it is bound.
func Start(t testing.TB) (*dns.Server, string) {
	t.Helper()
	refused := RefusedAddr(t)
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+refused+"\n"), 0o600); err != nil {
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

// RefusedAddr is a loopback port with nothing listening: a dial to it is refused.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// LookupA asks the DNS proxy at addr for name's A record (name fully qualified, with its
// trailing dot): the address answered, or the rcode's name when there is none.
func LookupA(t testing.TB, addr, name string) string {
	t.Helper()
	q := new(mdns.Msg)
	q.SetQuestion(name, mdns.TypeA)
	r, _, err := (&mdns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(q, addr)
	if err != nil {
		t.Fatalf("query %s: %v", name, err)
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*mdns.A); ok {
			return a.A.String()
		}
	}
	return mdns.RcodeToString[r.Rcode]
}
