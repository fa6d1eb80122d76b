package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// systemBundles are the OS CA bundles tried, in order, for file-root:system.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
	"/usr/local/share/certs/ca-root-nss.crt",
}

// fileEntry is one secret read from files. Paths are immutable; last is guarded by
// fileSecrets.loadMu.
type fileEntry struct {
	name      string // published resource name
	cert, key string // tls_certificate files; empty for a root
	ca        string // validation context file; empty for a certificate
	last      []byte // what was last published, to publish only changes
}

// fileSecrets serves file-cert: and file-root: resources (and file-mounted default/ROOTCA),
// re-reading them when fsnotify reports a change in their directories, including kubelet's
// ..data symlink swaps.
type fileSecrets struct {
	cfg        *Config      // immutable
	met        *metrics     // immutable
	store      *store       // concurrency-safe
	log        *slog.Logger // immutable
	onWorkload func(kp *tls.Certificate, chainPEM, keyPEM []byte)
	extras     *rootExtras // set once by NewManager: trust bundle and CRL for root secrets
	onCRL      func()      // set once by NewManager: the CRL changed (ROOTCA from the CA is pushed again)

	loadMu sync.Mutex // serialises loads, so an older read is never published after a newer one

	mu      sync.Mutex
	entries map[string]*fileEntry // guarded by mu
	dirs    map[string]bool       // guarded by mu: directory → watch added
	w       *fsnotify.Watcher     // guarded by mu: non-nil while run is running
}

func newFileSecrets(cfg *Config, met *metrics, st *store, log *slog.Logger, onWorkload func(*tls.Certificate, []byte, []byte)) *fileSecrets {
	return &fileSecrets{cfg: cfg, met: met, store: st, log: log, onWorkload: onWorkload,
		entries: make(map[string]*fileEntry), dirs: make(map[string]bool)}
}

// parseFileResource turns a file-cert:<cert>~<key> or file-root:<ca> name into an entry
// published as name.
func parseFileResource(name, spec string) (*fileEntry, error) {
	if rest, ok := strings.CutPrefix(spec, fileCertPrefix); ok {
		cert, key, ok := strings.Cut(rest, fileCertSplitter)
		if !ok || cert == "" || key == "" {
			return nil, fmt.Errorf("resource %q: want file-cert:<cert path>~<key path>", spec)
		}
		return &fileEntry{name: name, cert: cert, key: key}, nil
	}
	if spec == fileRootSystem {
		for _, p := range systemBundles {
			if _, err := os.Stat(p); err == nil {
				return &fileEntry{name: name, ca: p}, nil
			}
		}
		return nil, fmt.Errorf("resource %q: no OS CA bundle found in %v", spec, systemBundles)
	}
	if ca, ok := strings.CutPrefix(spec, fileRootPrefix); ok && ca != "" {
		return &fileEntry{name: name, ca: ca}, nil
	}
	return nil, fmt.Errorf("resource %q: want file-root:<ca path> or file-cert:<cert>~<key>", spec)
}

// add registers a file resource published as name (file-mounted default and ROOTCA); it is
// loaded when run starts.
func (f *fileSecrets) add(name, spec string) error {
	e, err := parseFileResource(name, spec)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.entries[name] = e
	f.mu.Unlock()
	return nil
}

// ensure returns the value of a file resource, loading it and watching its files on first use.
func (f *fileSecrets) ensure(name string) (*secretValue, error) {
	if v := f.store.get(name); v != nil {
		return v, nil
	}
	f.mu.Lock()
	e, ok := f.entries[name]
	if !ok {
		var err error
		if e, err = parseFileResource(name, name); err != nil {
			f.mu.Unlock()
			return nil, err
		}
		f.entries[name] = e
	}
	f.mu.Unlock()
	if err := f.load(e); err != nil {
		return nil, err
	}
	return f.store.get(name), nil
}

// load reads e's files and publishes them when they changed; a certificate is published only
// when its key matches it, a root bundle only with its valid certificates.
func (f *fileSecrets) load(e *fileEntry) error {
	f.watchDirsOf(e)
	f.loadMu.Lock()
	defer f.loadMu.Unlock()
	var content []byte
	var publish func()
	if e.ca != "" {
		b, err := os.ReadFile(e.ca)
		if err != nil {
			return f.fail(fmt.Errorf("resource %q: %w", e.name, err))
		}
		roots, err := validRoots(b)
		if err != nil {
			return f.fail(fmt.Errorf("resource %q: %s: %w", e.name, e.ca, err))
		}
		sec := rootSecret(e.name, roots, nil)
		if f.extras != nil {
			if e.name == ResourceRootCA {
				sec = f.extras.rootCASecret(roots)
			} else {
				_, crl := f.extras.snapshot()
				sec = rootSecret(e.name, roots, crl)
			}
		}
		// The roots with the bundle, and the CRL: any of them changing publishes.
		content = append(binary.AppendUvarint(nil, uint64(len(sec.rootPEM))), sec.rootPEM...)
		content = append(content, sec.crl...)
		publish = func() { f.store.publish(sec) }
	} else {
		certPEM, err := os.ReadFile(e.cert)
		if err != nil {
			return f.fail(fmt.Errorf("resource %q: %w", e.name, err))
		}
		keyPEM, err := os.ReadFile(e.key)
		if err != nil {
			return f.fail(fmt.Errorf("resource %q: %w", e.name, err))
		}
		kp, err := tls.X509KeyPair(certPEM, keyPEM)
		if err == nil {
			err = parseLeaf(&kp)
		}
		if err != nil {
			return f.fail(fmt.Errorf("resource %q: %s and %s are not a matching pair: %w", e.name, e.cert, e.key, err))
		}
		content = append(append([]byte(nil), certPEM...), keyPEM...)
		publish = func() {
			if e.name == ResourceDefault && f.onWorkload != nil {
				f.onWorkload(&kp, certPEM, keyPEM)
			}
			f.store.publish(certSecret(e.name, certPEM, keyPEM))
		}
	}
	if e.last != nil && bytes.Equal(e.last, content) {
		return nil
	}
	publish()
	e.last = content
	f.log.Info("file certificate loaded", "resource", e.name)
	return nil
}

func (f *fileSecrets) fail(err error) error {
	f.met.fileFails.Inc()
	return err
}

// validRoots keeps the parseable certificates of a bundle; an error when none is.
func validRoots(b []byte) ([]byte, error) {
	var out bytes.Buffer
	n, bad := 0, 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			bad++
			continue
		}
		_ = pem.Encode(&out, block)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("no valid certificate in bundle (%d invalid)", bad)
	}
	return out.Bytes(), nil
}

// watchDirsOf watches the directories of e's files and of their symlink targets, so both
// in-place writes and kubelet's ..data swaps are seen.
func (f *fileSecrets) watchDirsOf(e *fileEntry) {
	var dirs []string
	for _, p := range []string{e.cert, e.key, e.ca} {
		if p == "" {
			continue
		}
		dirs = append(dirs, filepath.Dir(p))
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range dirs {
		if _, ok := f.dirs[d]; !ok {
			f.dirs[d] = false
		}
	}
	f.addWatchesLocked()
}

// addWatchesLocked adds a watch for every directory not watched yet. f.mu must be held.
func (f *fileSecrets) addWatchesLocked() {
	if f.w == nil {
		return
	}
	for d, ok := range f.dirs {
		if ok {
			continue
		}
		if err := f.w.Add(d); err != nil {
			f.met.watchFails.Inc()
			f.log.Warn("cannot watch certificate directory; will retry", "dir", d, "err", err)
			continue
		}
		f.dirs[d] = true
	}
}

// after is time.After on the configured clock.
func (f *fileSecrets) after(d time.Duration) <-chan time.Time { return f.cfg.Clock.NewTimer(d).C() }

// run watches the registered directories until ctx is done, reloading every entry FileDebounce
// after the last event (and retrying a failed load for up to 10 s, e.g. a half-written pair).
func (f *fileSecrets) run(ctx context.Context) {
	var w *fsnotify.Watcher
	for {
		var err error
		if w, err = fsnotify.NewWatcher(); err == nil {
			break
		}
		f.met.watchFails.Inc()
		f.log.Error("cannot create file watcher; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-f.after(time.Second):
		}
	}
	f.mu.Lock()
	f.w = w
	f.addWatchesLocked()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.w = nil
		f.mu.Unlock()
		_ = w.Close()
	}()

	retries := 0
	maxRetries := int(10*time.Second/f.cfg.FileDebounce) + 1
	var timer <-chan time.Time
	if err := f.reloadAll(); err != nil {
		f.log.Warn("file certificates not loaded yet", "err", err)
		timer = f.after(f.cfg.FileDebounce)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			if timer == nil {
				timer = f.after(f.cfg.FileDebounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			f.met.watchFails.Inc()
			f.log.Warn("file watcher error", "err", err)
		case <-timer:
			timer = nil
			err := f.reloadAll()
			if err == nil {
				retries = 0
				continue
			}
			if retries++; retries <= maxRetries {
				timer = f.after(f.cfg.FileDebounce)
			}
			f.log.Warn("file certificates not reloaded; the previous ones stay in service", "err", err)
		}
	}
}

func (f *fileSecrets) reloadAll() error {
	var crlErr error
	if f.extras != nil {
		var changed bool
		if changed, crlErr = f.extras.reloadCRL(); changed && f.onCRL != nil {
			f.log.Info("CA CRL changed; pushing root certificates again")
			f.onCRL()
		}
	}
	f.mu.Lock()
	entries := make([]*fileEntry, 0, len(f.entries))
	for _, e := range f.entries {
		entries = append(entries, e)
	}
	f.addWatchesLocked()
	f.mu.Unlock()
	errs := []error{crlErr}
	for _, e := range entries {
		errs = append(errs, f.load(e))
	}
	return errors.Join(errs...)
}
