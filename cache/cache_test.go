package cache

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/wingman-mesh/wingman/internal/metric"
)

// wasmModule returns a small valid Wasm binary (header plus a custom section carrying tag).
func wasmModule(tag string) []byte {
	b := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x00, byte(len(tag) + 1), byte(len(tag))}
	return append(b, tag...)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// moduleServer is a real HTTP server serving bodies by path, counting requests; a path's
// handler may be replaced.
type moduleServer struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   map[string][]byte
	handlers map[string]http.HandlerFunc
	hits     map[string]int
}

func newModuleServer(t testing.TB) *moduleServer {
	s := &moduleServer{bodies: map[string][]byte{}, handlers: map[string]http.HandlerFunc{}, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		h, b, ok := s.handlers[r.URL.Path], s.bodies[r.URL.Path], true
		if h == nil {
			_, ok = s.bodies[r.URL.Path]
		}
		s.mu.Unlock()
		switch {
		case h != nil:
			h(w, r)
		case ok:
			_, _ = w.Write(b)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *moduleServer) serve(path string, b []byte) string {
	s.mu.Lock()
	s.bodies[path] = b
	s.mu.Unlock()
	return s.URL + path
}

func (s *moduleServer) handle(path string, h http.HandlerFunc) string {
	s.mu.Lock()
	s.handlers[path] = h
	s.mu.Unlock()
	return s.URL + path
}

func (s *moduleServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func newTestCache(t testing.TB, edit func(*Options)) *Cache {
	t.Helper()
	o := Options{Dir: t.TempDir(), initialBackoff: time.Millisecond, Registerer: metric.NewRegistry()}
	if edit != nil {
		edit(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHTTPFetchOnceThenCached(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("one")
	u := srv.serve("/one.wasm", mod)
	c := newTestCache(t, nil)
	for i := range 3 {
		p, err := c.Get(ctxT(t), u, GetOptions{Checksum: sum(mod)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, mod) {
			t.Fatalf("get %d: file %s holds %q, %v", i, p, got, err)
		}
		if filepath.Base(p) != sum(mod)+".wasm" {
			t.Errorf("file %s is not named by its content", p)
		}
		fi, _ := os.Stat(p)
		di, _ := os.Stat(filepath.Dir(p))
		if fi.Mode().Perm() != 0o644 || di.Mode().Perm() != 0o755 {
			t.Errorf("modes: file %v, dir %v; want 0644 in 0755", fi.Mode().Perm(), di.Mode().Perm())
		}
	}
	if n := srv.count("/one.wasm"); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
	// Without a checksum the URL's last pull is used (IfNotPresent).
	if _, err := c.Get(ctxT(t), u, GetOptions{}); err != nil || srv.count("/one.wasm") != 1 {
		t.Errorf("no-checksum get: %v, %d requests", err, srv.count("/one.wasm"))
	}
	if v, _ := c.o.Registerer.Value("wasm_cache_lookup_count", "hit", "true"); v != 3 {
		t.Errorf("wasm_cache_lookup_count{hit=true} = %v, want 3", v)
	}
	if v, _ := c.o.Registerer.Value("wasm_remote_fetch_count", "result", "success"); v != 1 {
		t.Errorf("wasm_remote_fetch_count{result=success} = %v, want 1", v)
	}
	if v, _ := c.o.Registerer.Value("wasm_cache_entries"); v != 1 {
		t.Errorf("wasm_cache_entries = %v, want 1", v)
	}
}

func TestChecksumMismatch(t *testing.T) {
	srv := newModuleServer(t)
	u := srv.serve("/m.wasm", wasmModule("m"))
	c := newTestCache(t, nil)
	_, err := c.Get(ctxT(t), u, GetOptions{Checksum: sum(wasmModule("other"))})
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("err = %v, want checksum mismatch", err)
	}
	if v, _ := c.o.Registerer.Value("wasm_remote_fetch_count", "result", "checksum_mismatched"); v != 1 {
		t.Errorf("checksum_mismatched = %v", v)
	}
}

func TestRetriesAndFailures(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("flaky")
	var calls atomic.Int32
	flaky := srv.handle("/flaky.wasm", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(mod)
	})
	missing := srv.URL + "/missing.wasm"
	broken := srv.handle("/broken.wasm", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotImplemented) })
	notWasm := srv.serve("/text.wasm", []byte("<html>not a module</html>"))
	c := newTestCache(t, func(o *Options) { o.HTTPRequestMaxRetries = 3 })
	if _, err := c.Get(ctxT(t), flaky, GetOptions{}); err != nil {
		t.Fatalf("flaky: %v", err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("flaky: %d attempts, want 3", n)
	}
	for _, tc := range []struct{ url, path, want string }{
		{missing, "/missing.wasm", "status code 404"},
		{broken, "/broken.wasm", "status code 501"},
		{notWasm, "/text.wasm", "is invalid"},
	} {
		_, err := c.Get(ctxT(t), tc.url, GetOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.path, err, tc.want)
		}
		if n := srv.count(tc.path); n != 1 {
			t.Errorf("%s: %d attempts, want 1 (not retryable)", tc.path, n)
		}
	}
	// A 5xx is retried up to the limit.
	always := srv.handle("/down.wasm", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	if _, err := c.Get(ctxT(t), always, GetOptions{}); err == nil || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("down: err = %v", err)
	}
}

func TestSlowFetchTimesOut(t *testing.T) {
	srv := newModuleServer(t)
	release := make(chan struct{})
	defer close(release)
	slow := srv.handle("/slow.wasm", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c := newTestCache(t, nil)
	start := time.Now()
	_, err := c.Get(ctxT(t), slow, GetOptions{Timeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatal("slow fetch succeeded")
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("timeout not honoured: %v", time.Since(start))
	}
	// A caller's own context ends only its wait.
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if _, err := c.Get(ctx, slow, GetOptions{Timeout: time.Minute}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v", err)
	}
}

func TestOneFetchForManyCallers(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("shared")
	gate := make(chan struct{})
	u := srv.handle("/shared.wasm", func(w http.ResponseWriter, r *http.Request) {
		<-gate
		_, _ = w.Write(mod)
	})
	c := newTestCache(t, nil)
	var wg sync.WaitGroup
	paths := make([]string, 200)
	errs := make([]error, 200)
	for i := range 200 {
		wg.Go(func() { paths[i], errs[i] = c.Get(ctxT(t), u, GetOptions{Checksum: sum(mod)}) })
	}
	close(gate)
	wg.Wait()
	for i := range paths {
		if errs[i] != nil || paths[i] != paths[0] {
			t.Fatalf("caller %d: %q, %v", i, paths[i], errs[i])
		}
	}
	if n := srv.count("/shared.wasm"); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

func TestExpiryAndPurge(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("old")
	u := srv.serve("/old.wasm", mod)
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newTestCache(t, func(o *Options) { o.now = clock; o.ModuleExpiry = time.Hour })
	p, err := c.Get(ctxT(t), u, GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	advance(50 * time.Minute)
	c.Purge()
	if _, err := c.Get(ctxT(t), u, GetOptions{}); err != nil || srv.count("/old.wasm") != 1 { // touched: lives on
		t.Fatalf("after 50m: %v, %d fetches", err, srv.count("/old.wasm"))
	}
	advance(61 * time.Minute)
	c.Purge()
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("expired module still on disk: %v", err)
	}
	if v, _ := c.o.Registerer.Value("wasm_cache_entries"); v != 0 {
		t.Errorf("wasm_cache_entries = %v after purge", v)
	}
	if _, err := c.Get(ctxT(t), u, GetOptions{}); err != nil || srv.count("/old.wasm") != 2 {
		t.Errorf("after purge: %v, %d fetches (want a new one)", err, srv.count("/old.wasm"))
	}
}

func TestPurgeLoopRuns(t *testing.T) {
	srv := newModuleServer(t)
	u := srv.serve("/p.wasm", wasmModule("p"))
	c := newTestCache(t, func(o *Options) { o.PurgeInterval = 10 * time.Millisecond; o.ModuleExpiry = time.Nanosecond })
	p, err := c.Get(ctxT(t), u, GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("purge loop never removed the expired module")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRestartWithWarmCache(t *testing.T) {
	srv := newModuleServer(t)
	mod, mod2 := wasmModule("warm"), wasmModule("warm2")
	u, u2 := srv.serve("/warm.wasm", mod), srv.serve("/warm2.wasm", mod2)
	dir := t.TempDir()
	c1 := newTestCache(t, func(o *Options) { o.Dir = dir })
	p1, err := c1.Get(ctxT(t), u, GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c1.Get(ctxT(t), u2, GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c1.Close()
	// A crash mid-write leaves a temporary file; a disk fault corrupts a module.
	tmp := filepath.Join(filepath.Dir(p1), "."+filepath.Base(p1)+".tmp-123456") // atomicfile's temporary name
	if err := os.WriteFile(tmp, mod[:5], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p2, append(bytes.Clone(mod2[:8]), "garbage"...), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Close() // nothing can be fetched any more
	c2 := newTestCache(t, func(o *Options) { o.Dir = dir })
	got, err := c2.Get(ctxT(t), u, GetOptions{})
	if err != nil || got != p1 {
		t.Fatalf("warm get: %q, %v; want %q", got, err, p1)
	}
	if got, err := c2.Get(ctxT(t), u, GetOptions{Checksum: sum(mod)}); err != nil || got != p1 {
		t.Fatalf("warm get by checksum: %q, %v", got, err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Error("temporary file survived the restart")
	}
	if _, err := c2.Get(ctxT(t), u2, GetOptions{}); err == nil {
		t.Error("a corrupt module was served after the restart")
	}
}

func TestBlockedAddresses(t *testing.T) {
	srv := newModuleServer(t)
	u := srv.serve("/b.wasm", wasmModule("b"))
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := newTestCache(t, func(o *Options) {
		o.BlockedCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	})
	for _, tc := range []struct{ url, want string }{
		{u, "blocked CIDR range 127.0.0.0/8"},
		{fmt.Sprintf("http://localhost:%d/b.wasm", port), "blocked CIDR range"}, // a name resolving to it
		{"http://169.254.169.254/latest/meta-data", "link-local"},
		{"http://[fe80::1]:80/m.wasm", "link-local"},
		{"http://100.100.100.200/m.wasm", "cloud metadata"},
		{"http://[::ffff:169.254.169.254]/m.wasm", "link-local"},
		{"http://[64:ff9b::a9fe:a9fe]/m.wasm", "link-local"},
		{"http://[fd00:ec2::254]/m.wasm", "cloud metadata"},
	} {
		_, err := c.Get(ctxT(t), tc.url, GetOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.url, err, tc.want)
		}
	}
	if n := srv.count("/b.wasm"); n != 0 {
		t.Errorf("the blocked server was reached %d times", n)
	}
}

func TestSizeCapAndUnboxing(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule(strings.Repeat("x", 100))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(mod)
	_ = zw.Close()
	var tgz bytes.Buffer
	zw = gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "plugin.wasm", Mode: 0o644, Size: int64(len(mod))})
	_, _ = tw.Write(mod)
	_ = tw.Close()
	_ = zw.Close()
	var bomb bytes.Buffer
	zw = gzip.NewWriter(&bomb)
	_, _ = zw.Write(append(wasmModule(""), make([]byte, 1<<20)...))
	_ = zw.Close()
	c := newTestCache(t, func(o *Options) { o.MaxModuleBytes = 4096 })
	for _, body := range [][]byte{gz.Bytes(), tgz.Bytes()} {
		p, err := c.Get(ctxT(t), srv.serve(fmt.Sprintf("/boxed-%d.wasm", len(body)), body), GetOptions{Checksum: sum(mod)})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, mod) {
			t.Errorf("unboxed module differs")
		}
	}
	for name, body := range map[string][]byte{"big": append(wasmModule(""), make([]byte, 8192)...), "bomb": bomb.Bytes()} {
		_, err := c.Get(ctxT(t), srv.serve("/"+name+".wasm", body), GetOptions{})
		if err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("%s: err = %v, want too large", name, err)
		}
	}
}

func TestNamesStayInsideTheDirectory(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("trav")
	srv.serve("/a/../../../etc/passwd", mod)
	dir := t.TempDir()
	c := newTestCache(t, func(o *Options) { o.Dir = dir })
	p, err := c.Get(ctxT(t), srv.URL+"/%2e%2e/%2e%2e/etc/passwd", GetOptions{})
	if err == nil && !strings.HasPrefix(p, filepath.Join(dir, "wasm")+string(filepath.Separator)) {
		t.Errorf("module written at %s, outside %s", p, dir)
	}
	_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasPrefix(path, filepath.Join(dir, "wasm")) {
			t.Errorf("file outside the cache tree: %s", path)
		}
		return nil
	})
}

func TestModesWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	srv := newModuleServer(t)
	c := newTestCache(t, nil)
	p, err := c.Get(ctxT(t), srv.serve("/u.wasm", wasmModule("u")), GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	di, _ := os.Stat(filepath.Dir(p))
	if fi.Mode().Perm() != 0o644 || di.Mode().Perm() != 0o755 {
		t.Errorf("with umask 077: file %v, dir %v; want 0644 in 0755", fi.Mode().Perm(), di.Mode().Perm())
	}
}

// A fetch runs in the context of the caller that started it, without its cancellation: that
// caller giving up leaves the fetch to the others, and Close ends a fetch in progress.
func TestFetchContext(t *testing.T) {
	srv := newModuleServer(t)
	mod := wasmModule("ctx")
	started := make(chan struct{}, 2)
	gate := make(chan struct{})
	u := srv.handle("/ctx.wasm", func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-gate:
			_, _ = w.Write(mod)
		case <-r.Context().Done():
		}
	})
	c := newTestCache(t, nil)
	first, cancel := context.WithCancel(ctxT(t))
	firstErr := make(chan error, 1)
	go func() {
		_, err := c.Get(first, u, GetOptions{Checksum: sum(mod)})
		firstErr <- err
	}()
	<-started
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("first caller: %v, want its own cancellation", err)
	}
	second := make(chan error, 1)
	go func() {
		_, err := c.Get(ctxT(t), u, GetOptions{Checksum: sum(mod)})
		second <- err
	}()
	close(gate)
	if err := <-second; err != nil {
		t.Fatalf("second caller after the first gave up: %v", err)
	}
	if n := srv.count("/ctx.wasm"); n != 1 {
		t.Errorf("%d fetches, want 1 (the first caller's, carried on)", n)
	}

	// Close ends a fetch in progress; the caller waiting on it gets an error.
	c2 := newTestCache(t, nil)
	stuck := srv.handle("/stuck.wasm", func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	})
	waitErr := make(chan error, 1)
	go func() {
		_, err := c2.Get(ctxT(t), stuck, GetOptions{Timeout: time.Hour})
		waitErr <- err
	}()
	<-started
	c2.Close()
	if err := <-waitErr; err == nil {
		t.Fatal("a fetch cut by Close succeeded")
	}
}
