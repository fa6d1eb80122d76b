package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// Cache fetches Wasm modules once and keeps them as files. Safe for concurrent use.
type Cache struct {
	o     Options  // immutable after New
	m     *metrics // immutable
	store *store   // immutable
	http  *httpFetcher
	oci   *ociFetcher

	wg sync.WaitGroup // fetch goroutines

	loadOnce sync.Once
	loadErr  error // set once by load

	mu       sync.Mutex // guards the fields below
	closed   bool
	modules  map[string]*module   // by the module's sha256 (hex)
	byDigest map[digestKey]string // (module name, checksum) → module sha256
	byURL    map[string]*urlEntry // download URL → what it last gave
	flights  map[flightKey]*flight
}

// module is one file in the cache.
type module struct {
	path string
	size int64
	last time.Time       // last lookup or fetch; expiry counts from it
	urls map[string]bool // download URLs whose entries point here
}

// urlEntry is what a download URL last gave: the checksum Istio compares (the module's sha256
// for http(s), the manifest digest for oci) and the module.
type urlEntry struct {
	URL    string `json:"url"`
	Name   string `json:"name"`
	Digest string `json:"digest"`
	Module string `json:"module"`
	// versions: resource name → WasmPlugin resource version at the last pull (in memory only:
	// after a restart an Always policy pulls again, as Istio after its restart).
	versions map[string]string
}

type digestKey struct{ name, digest string }

type flightKey struct{ url, checksum string }

// flight is one fetch in progress; everyone asking for the same module waits on it.
type flight struct {
	cancel context.CancelFunc // ends the fetch (Close)
	done   chan struct{}
	path   string
	err    error
}

// New returns the cache in o.Dir; its index is rebuilt from the files there on first use.
func New(o Options) (*Cache, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	st, err := openStore(o.Dir)
	if err != nil {
		return nil, err
	}
	g := newGuard(o.BlockedCIDRs)
	c := &Cache{o: o, m: newMetrics(o.Registerer), store: st,
		http:     newHTTPFetcher(&o, g),
		oci:      newOCIFetcher(&o, g),
		modules:  map[string]*module{},
		byDigest: map[digestKey]string{},
		byURL:    map[string]*urlEntry{},
		flights:  map[flightKey]*flight{},
	}
	return c, nil
}

// load rebuilds the index from disk, once, on first use: an agent without WasmPlugins never
// reads the directory, and start-up never waits for modules to be re-hashed.
func (c *Cache) load() error {
	c.loadOnce.Do(func() {
		entries, sizes, err := c.store.load(c.o.Logger)
		if err != nil {
			c.loadErr = err
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		now := c.o.now()
		for sha, size := range sizes {
			c.modules[sha] = &module{path: c.store.modulePath(sha), size: size, last: now, urls: map[string]bool{}}
		}
		for _, e := range entries {
			mod := c.modules[e.Module]
			if mod == nil {
				continue
			}
			e.versions = map[string]string{}
			c.byURL[e.URL] = e
			c.byDigest[digestKey{e.Name, e.Digest}] = e.Module
			mod.urls[e.URL] = true
		}
		c.m.entries.Set(float64(len(c.modules)))
	})
	return c.loadErr
}

// Run purges expired modules every PurgeInterval until ctx is done, then closes the cache.
func (c *Cache) Run(ctx context.Context) error {
	defer c.Close()
	t := time.NewTicker(c.o.PurgeInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.Purge()
		case <-ctx.Done():
			return nil
		}
	}
}

// Close cancels fetches in progress and waits for them. Later fetches fail.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	for _, f := range c.flights {
		f.cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Purge removes the modules not used for ModuleExpiry, with their index entries.
func (c *Cache) Purge() {
	if c.load() != nil {
		return
	}
	now := c.o.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for sha, mod := range c.modules {
		if now.Sub(mod.last) <= c.o.ModuleExpiry {
			continue
		}
		if err := c.store.removeModule(sha); err != nil {
			c.o.Logger.Warn("failed to purge Wasm module", "path", mod.path, "err", err)
			continue
		}
		for u := range mod.urls {
			if e := c.byURL[u]; e != nil {
				delete(c.byDigest, digestKey{e.Name, e.Digest})
				delete(c.byURL, u)
				c.store.removeEntry(u)
			}
		}
		delete(c.modules, sha)
		c.o.Logger.Debug("removed stale Wasm module", "path", mod.path)
	}
	c.m.entries.Set(float64(len(c.modules)))
}

// Get returns the local file of the module at downloadURL, fetching it if needed. Callers
// asking for the same module at once share one fetch; ctx bounds only this caller's wait.
func (c *Cache) Get(ctx context.Context, downloadURL string, opts GetOptions) (string, error) {
	if err := c.load(); err != nil {
		return "", err
	}
	u, err := url.Parse(downloadURL)
	if err != nil {
		return "", fmt.Errorf("fail to parse Wasm module fetch url: %s, error: %w", downloadURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci" {
		return "", fmt.Errorf("unsupported Wasm module downloading URL scheme: %v", u.Scheme)
	}
	checksum := strings.ToLower(opts.Checksum)
	modName := downloadURL
	if u.Scheme == "oci" {
		ref := strings.TrimPrefix(downloadURL, "oci://")
		if checksum == "" {
			// As Istio: an image pinned by digest is verified against it.
			if d, err := nameDigest(ref); err == nil {
				checksum = d
			}
		}
		if r, err := name.ParseReference(ref); err == nil {
			modName = "oci://" + r.Context().Name() // the repository, without tag or digest
		}
	}
	c.mu.Lock()
	if p := c.lookupLocked(u, downloadURL, modName, checksum, opts); p != "" {
		c.mu.Unlock()
		c.m.lookups.With("true").Inc()
		return p, nil
	}
	c.m.lookups.With("false").Inc()
	if c.closed {
		c.mu.Unlock()
		return "", errors.New("wasm cache closed")
	}
	fk := flightKey{downloadURL, checksum}
	f := c.flights[fk]
	if f == nil {
		// The fetch runs in the first caller's context without its cancellation: every caller
		// asking for the module waits on it, and one giving up must not fail the others. Close
		// (or the pull timeout) ends it.
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{cancel: cancel, done: make(chan struct{})}
		c.flights[fk] = f
		c.wg.Go(func() {
			defer cancel()
			c.fetch(fctx, fk, u, modName, checksum, opts, f)
		})
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.path, f.err
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

func nameDigest(ref string) (string, error) {
	d, err := name.NewDigest(ref)
	if err != nil {
		return "", err
	}
	s, ok := strings.CutPrefix(d.DigestStr(), "sha256:")
	if !ok {
		return "", errors.New("not a sha256 digest")
	}
	return s, nil
}

// lookupLocked returns the cached module's path, or "" when it must be fetched (Istio's
// getEntry: with a checksum, any module of that name and checksum; without, what the URL last
// gave unless the pull policy asks for a new pull).
func (c *Cache) lookupLocked(u *url.URL, downloadURL, name, checksum string, opts GetOptions) string {
	var sha string
	if checksum != "" {
		sha = c.byDigest[digestKey{name, checksum}]
	} else if e := c.byURL[downloadURL]; e != nil {
		policy := opts.PullPolicy
		if policy == PullUnspecified {
			// Istio: an oci image tagged latest defaults to Always, everything else IfNotPresent.
			policy = PullIfNotPresent
			if u.Scheme == "oci" && strings.HasSuffix(u.Path, ":latest") {
				policy = PullAlways
			}
		}
		if policy == PullAlways {
			// Pull again only when the WasmPlugin changed since this resource's last pull.
			if e.versions[opts.ResourceName] != opts.ResourceVersion {
				return ""
			}
		}
		sha = e.Module
		e.versions[opts.ResourceName] = opts.ResourceVersion
	}
	mod := c.modules[sha]
	if mod == nil {
		return ""
	}
	mod.last = c.o.now()
	return mod.path
}

// fetch downloads, verifies and stores one module, then releases everyone waiting on f.
func (c *Cache) fetch(ctx context.Context, fk flightKey, u *url.URL, name, checksum string, opts GetOptions, f *flight) {
	f.path, f.err = c.download(ctx, u, fk.url, name, checksum, opts)
	c.mu.Lock()
	delete(c.flights, fk)
	c.mu.Unlock()
	close(f.done)
}

func (c *Cache) download(ctx context.Context, u *url.URL, downloadURL, name, checksum string, opts GetOptions) (string, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = defaultPullTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var b []byte
	var digest string
	switch u.Scheme {
	case "http", "https":
		var err error
		if b, err = c.http.fetch(ctx, downloadURL, c.insecure(u.Host)); err != nil {
			c.m.fetches.With(downloadFailure).Inc()
			return "", err
		}
		sum := sha256.Sum256(b)
		digest = hex.EncodeToString(sum[:])
	case "oci":
		img, d, err := c.oci.prepare(ctx, strings.TrimPrefix(downloadURL, "oci://"), c.insecure(u.Host), opts.PullSecret)
		if err != nil {
			c.m.fetches.With(manifestFailure).Inc()
			return "", fmt.Errorf("could not fetch Wasm OCI image: %w", err)
		}
		digest = d
		if checksum == "" || checksum == digest {
			// Istio: with the image's digest known, look again before pulling the layers.
			c.mu.Lock()
			p := c.lookupLocked(u, downloadURL, name, digest, opts)
			if p != "" {
				c.recordLocked(downloadURL, name, digest, c.byDigest[digestKey{name, digest}], opts)
			}
			c.mu.Unlock()
			if p != "" {
				return p, nil
			}
		}
		if checksum != "" && checksum != digest {
			break
		}
		if b, err = c.oci.extract(img); err != nil {
			c.m.fetches.With(downloadFailure).Inc()
			return "", fmt.Errorf("could not fetch Wasm binary: %w", err)
		}
	}
	if checksum != "" && checksum != digest {
		c.m.fetches.With(checksumMismatch).Inc()
		return "", fmt.Errorf("module downloaded from %v has checksum %v, which does not match: %v", downloadURL, digest, checksum)
	}
	if !isWasm(b) {
		c.m.fetches.With(downloadFailure).Inc()
		return "", fmt.Errorf("fetched Wasm binary from %s is invalid", downloadURL)
	}
	c.m.fetches.With(fetchSuccess).Inc()
	sum := sha256.Sum256(b)
	sha := hex.EncodeToString(sum[:])
	path, err := c.store.writeModule(sha, b)
	if err != nil {
		return "", err
	}
	e := &urlEntry{URL: downloadURL, Name: name, Digest: digest, Module: sha}
	if err := c.store.writeEntry(e); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	mod := c.modules[sha]
	if mod == nil {
		// A purge may have removed this content (an expired entry) since it was written.
		if _, err := os.Stat(path); err != nil {
			if path, err = c.store.writeModule(sha, b); err != nil {
				return "", err
			}
		}
		mod = &module{path: path, size: int64(len(b)), urls: map[string]bool{}}
		c.modules[sha] = mod
	}
	mod.last = c.o.now()
	c.recordLocked(downloadURL, name, digest, sha, opts)
	c.m.entries.Set(float64(len(c.modules)))
	return path, nil
}

// recordLocked points downloadURL at module sha.
func (c *Cache) recordLocked(downloadURL, name, digest, sha string, opts GetOptions) {
	e := c.byURL[downloadURL]
	if e == nil {
		e = &urlEntry{URL: downloadURL, versions: map[string]string{}}
		c.byURL[downloadURL] = e
	}
	if old := c.modules[e.Module]; old != nil && e.Module != sha {
		delete(old.urls, downloadURL)
	}
	e.Name, e.Digest, e.Module = name, digest, sha
	e.versions[opts.ResourceName] = opts.ResourceVersion
	c.byDigest[digestKey{name, digest}] = sha
	if mod := c.modules[sha]; mod != nil {
		mod.urls[downloadURL] = true
	}
}

func (c *Cache) insecure(host string) bool {
	for _, h := range c.o.InsecureRegistries {
		if h == "*" || h == host {
			return true
		}
	}
	return false
}

var wasmMagic = []byte{0x00, 0x61, 0x73, 0x6d}

// isWasm checks the 8-byte Wasm header's magic number, as Istio does.
func isWasm(b []byte) bool { return len(b) >= 8 && bytes.Equal(b[:4], wasmMagic) }
