package dns

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnabled: Istio's Agent.isDNSServerEnabled — capture only for sidecars, the explicit
// server switch for any proxy type.
func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		capture  bool
		nodeType string
		server   bool
		want     bool
	}{
		{true, "sidecar", false, true},
		{true, "router", false, false},
		{true, "waypoint", false, false},
		{false, "sidecar", false, false},
		{false, "router", true, true},
		{false, "sidecar", true, true},
	} {
		if got := Enabled(c.capture, c.nodeType, c.server); got != c.want {
			t.Errorf("Enabled(capture=%v, %s, server=%v) = %v, want %v", c.capture, c.nodeType, c.server, got, c.want)
		}
	}
}

// TestPort53: NewLocalDNSServer's handling of an address ending in ":53".
func TestPort53(t *testing.T) {
	dir := t.TempDir()
	alt := filepath.Join(dir, "resolv.conf")
	missing := filepath.Join(dir, "missing.conf")
	if err := os.WriteFile(alt, []byte("nameserver 127.0.0.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := Config{Addr: "localhost:53", ResolvConf: "/etc/resolv.conf"}

	got, warn := base.Port53(0, alt)
	if got.Addr != "localhost:53" || got.ResolvConf != alt || !got.RespondBeforeSync || warn != "" {
		t.Fatalf("root with %s present: %+v %q", alt, got, warn)
	}
	got, _ = base.Port53(0, missing)
	if got.ResolvConf != "/etc/resolv.conf" || !got.RespondBeforeSync {
		t.Fatalf("root without the alternate file: %+v", got)
	}
	got, warn = base.Port53(1337, alt)
	if got.Addr != DefaultAddr || got.ResolvConf != "/etc/resolv.conf" || got.RespondBeforeSync ||
		!strings.Contains(warn, "localhost:53") || !strings.Contains(warn, DefaultAddr) {
		t.Fatalf("not root: %+v %q", got, warn)
	}
	for _, addr := range []string{"localhost:15053", "127.0.0.1:5353", "0.0.0.0:153"} {
		c := Config{Addr: addr, ResolvConf: "/etc/resolv.conf"}
		if got, warn := c.Port53(0, alt); got != c || warn != "" {
			t.Fatalf("%s changed: %+v %q", addr, got, warn)
		}
	}
}

// TestPort53AsRootServesBeforeSync binds the real port 53 when the test runs as root and
// checks that a query before any NameTable is forwarded (Istio's respondBeforeSync) to the
// nameserver of the alternate resolv.conf.
func TestPort53AsRootServesBeforeSync(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to bind port 53")
	}
	if pc, err := net.ListenPacket("udp", "127.0.0.1:53"); err != nil {
		t.Skipf("127.0.0.1:53 is taken: %v", err)
	} else {
		_ = pc.Close()
	}
	up := startUpstream(t, "127.0.0.1")
	alt := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(alt, []byte("nameserver "+up.addr.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := Config{Addr: "127.0.0.1:53", ResolvConf: filepath.Join(t.TempDir(), "absent")}.Port53(0, alt)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := run(t, s)
	if r := ask(t, "udp", addr, "example.org.", 1, 0); r.Rcode != 0 || len(r.Answer) != 1 {
		t.Fatalf("before sync on :53 as root: %v", r)
	}
	if got := len(up.transports()); got != 1 {
		t.Fatalf("upstream asked %d times, want 1", got)
	}
}
