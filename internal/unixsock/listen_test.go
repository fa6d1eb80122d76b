package unixsock

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

func TestListenPublishesListeningSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "XDS")
	if err := os.WriteFile(path, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o666 {
		t.Fatalf("mode %v, want a socket with 0666", fi.Mode())
	}
	if got := l.Addr().String(); got != path {
		t.Fatalf("Addr %q, want %q", got, path)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial right after Listen: %v", err)
	}
	c.Close()
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only the socket", len(ents))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left after Close: %v", err)
	}
}

func TestCloseKeepsSuccessorSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "socket")
	old, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	next, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	old.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the successor's socket is gone after its predecessor closed: %v", err)
	}
	c.Close()
}

// TestListenMakesDirectory: a missing directory is made with Istio's 0750 (less the umask).
func TestListenMakesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no")
	l, err := Listen(filepath.Join(dir, "socket"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&^0o750 != 0 || perm&0o700 != 0o700 {
		t.Fatalf("directory mode %v, want 0750 less the umask", perm)
	}
	if _, err := listenMode(filepath.Join(t.TempDir(), "missing", "socket"), 0o600); err == nil {
		t.Fatal("listenMode in a missing directory succeeded")
	}
}

// TestNoRefusalWindow races a client that dials as soon as the file appears (as the proxy's
// tests and a starting Envoy do) against Listen: it must never be refused.
func TestNoRefusalWindow(t *testing.T) {
	testNoRefusalWindow(t, func(path string) (net.Listener, error) { return Listen(path) })
}

func testNoRefusalWindow(t *testing.T, listen func(string) (net.Listener, error)) {
	dir := t.TempDir()
	for i := range 300 {
		path := filepath.Join(dir, strconv.Itoa(i))
		dialed := make(chan error, 1)
		go func() {
			for {
				if _, err := os.Stat(path); err == nil {
					c, err := net.Dial("unix", path)
					if err == nil {
						c.Close()
					}
					dialed <- err
					return
				}
				runtime.Gosched()
			}
		}()
		l, err := listen(path)
		if err != nil {
			t.Fatal(err)
		}
		err = <-dialed
		l.Close()
		if err != nil {
			t.Fatalf("attempt %d: dial as soon as the socket appeared: %v", i, err)
		}
	}
}
