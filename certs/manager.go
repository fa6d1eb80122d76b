package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// workload is one workload certificate with everything served from it. Immutable.
type workload struct {
	cert         *tls.Certificate // for GetClientCertificate
	chainPEM     []byte
	keyPEM       []byte
	rootPEM      []byte
	notAfter     time.Time
	rootNotAfter time.Time
	rotateAt     time.Time // zero for file-mounted certificates: they are never expiry-rotated
}

// Manager owns the workload's secrets: it pre-warms and rotates the CA-signed certificate, loads
// and watches file-mounted ones, and publishes all of them for the SDS Server.
type Manager struct {
	cfg      Config       // immutable after NewManager
	spiffeID string       // immutable
	log      *slog.Logger // immutable
	met      *metrics     // immutable
	ca       *caClient    // immutable; nil when certificates come only from files
	store    *store       // concurrency-safe
	files    *fileSecrets // concurrency-safe
	extras   *rootExtras  // concurrency-safe: PCDS trust bundle and CRL for root secrets

	keys      chan privateKey // unbuffered: the key generator hands over the next key
	keyWant   chan struct{}   // capacity 1: rotate asks for the next key, ahead of a rotation
	ready     chan struct{}   // closed once the first workload certificate is in hand
	readyOnce sync.Once

	cur    atomic.Pointer[workload] // the workload certificate being served
	chains chainCache               // owned by the rotator goroutine (renew)

	aliasMu sync.Mutex          // serialises alias publication against installs
	aliases map[string]struct{} // guarded by aliasMu: unknown names served the workload cert

	keyReady  atomic.Bool   // the next key is generated and waiting to be taken
	lastLocal atomic.Int64  // nanoseconds of agent-side work in the last rotation
	renewals  atomic.Uint64 // certificates installed from the CA
}

// NewManager checks cfg and builds a Manager; nothing runs until Run.
func NewManager(cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:      cfg,
		spiffeID: cfg.SpiffeID(),
		log:      cfg.Logger,
		store:    newStore(),
		keys:     make(chan privateKey),
		keyWant:  make(chan struct{}, 1),
		ready:    make(chan struct{}),
		aliases:  make(map[string]struct{}),
	}
	m.met = newMetrics(cfg.Registerer, m.expiries)
	m.extras = &rootExtras{crlPath: cfg.CRLPath}
	m.files = newFileSecrets(&m.cfg, m.met, m.store, m.log, m.fileWorkload)
	m.files.extras, m.files.onCRL = m.extras, m.publishCARoot
	if d := m.extras.crlDir(); d != "" {
		m.files.dirs[d] = false // watched once the file watcher runs
	}
	if _, err := m.extras.reloadCRL(); err != nil {
		m.log.Warn("CA CRL not served", "err", err)
	}
	switch dir := m.fileCertDir(); {
	case cfg.ServeOnlyFiles:
	case dir != "":
		m.log.Info("serving file-mounted workload certificates", "dir", dir)
		err := errors.Join(
			m.files.add(ResourceDefault, fileCertPrefix+filepath.Join(dir, "cert-chain.pem")+fileCertSplitter+filepath.Join(dir, "key.pem")),
			m.files.add(ResourceRootCA, fileRootPrefix+filepath.Join(dir, "root-cert.pem")))
		if err != nil {
			return nil, fmt.Errorf("certs: file-mounted certificates in %s: %w", dir, err)
		}
	case cfg.CAAddr != "":
		m.ca = newCAClient(&m.cfg, m.met)
	default:
		return nil, errors.New("certs: no certificate source: set CAAddr or provide file-mounted certificates")
	}
	return m, nil
}

// fileCertDir is the first FileCertDirs entry holding all three files, other than OutputCertsDir.
func (m *Manager) fileCertDir() string {
	for _, dir := range m.cfg.FileCertDirs {
		if m.cfg.OutputCertsDir != "" && filepath.Clean(dir) == filepath.Clean(m.cfg.OutputCertsDir) {
			continue
		}
		all := true
		for _, f := range []string{"cert-chain.pem", "key.pem", "root-cert.pem"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				all = false
			}
		}
		if all {
			return dir
		}
	}
	return ""
}

// Run generates the first key at once, fetches and rotates the workload certificate, and watches
// certificate files, until ctx is done. It returns nil once every goroutine it started is done.
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	start := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	if m.ca != nil {
		start(m.generateKeys)
		start(m.rotate)
	}
	start(m.files.run)
	wg.Wait()
	if m.ca != nil {
		m.ca.close()
	}
	return nil
}

// Ready is closed once the first workload certificate is available.
func (m *Manager) Ready() <-chan struct{} { return m.ready }

// GetClientCertificate returns the current workload certificate (an empty one before the first),
// for use as tls.Config.GetClientCertificate: it is read on every handshake.
func (m *Manager) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if w := m.cur.Load(); w != nil {
		return w.cert, nil
	}
	return &tls.Certificate{}, nil
}

// generateKeys makes each key and its CSR ahead of need: the first at once, each later one when
// rotate asks for it, a lead before the rotation that takes it (keyLookAhead). The look-ahead key
// is thus off the start-up path (on a dense node, agents starting together would otherwise each
// make two keys at once) and off the rotation path.
func (m *Manager) generateKeys(ctx context.Context) {
	m.ca.warm(ctx) // connect to the CA while the first key is made
	for first := true; ; first = false {
		if !first {
			select {
			case <-m.keyWant:
			case <-ctx.Done():
				return
			}
		}
		for {
			k, err := generateKey(&m.cfg)
			if err == nil {
				// The CSR depends only on the key and the identity: sign it now, off the
				// rotation path (an RSA-2048 signature costs milliseconds).
				k.csr, err = createCSR(k.signer, m.spiffeID)
			}
			if err != nil {
				m.log.Error("key generation failed", "err", err)
				if !m.sleep(ctx, time.Second) {
					return
				}
				continue
			}
			m.keyReady.Store(true)
			select {
			case m.keys <- k:
				m.keyReady.Store(false)
			case <-ctx.Done():
				return
			}
			break
		}
	}
}

// keyLookAhead is when to ask for the key of the rotation due at rotateAt: a minute before it
// (RSA-4096 takes about a second here), or halfway there for short-lived certificates.
func keyLookAhead(now, rotateAt time.Time) time.Time {
	return rotateAt.Add(-min(time.Minute, rotateAt.Sub(now)/2))
}

// rotate fetches the first certificate (retrying with backoff) and then replaces each one when
// rotationDue says so. A failure keeps the current certificate in service and retries.
func (m *Manager) rotate(ctx context.Context) {
	bo := backoff{initial: m.cfg.RetryInitial, max: m.cfg.RetryMax}
	var key privateKey // kept across failed attempts
	for {
		if w := m.cur.Load(); w != nil {
			if key.signer == nil { // a key kept from a failed attempt needs no other
				if !m.sleepUntil(ctx, keyLookAhead(m.cfg.Clock.Now(), w.rotateAt)) {
					return
				}
				select {
				case m.keyWant <- struct{}{}:
				default: // already asked
				}
			}
			if !m.sleepUntil(ctx, w.rotateAt) {
				return
			}
		}
		trigger := time.Now() // for the local-latency metric, as sent and got in renew
		if key.signer == nil {
			select {
			case key = <-m.keys:
			case <-ctx.Done():
				return
			}
		}
		err := m.renew(ctx, key, trigger)
		if err == nil {
			key = privateKey{}
			bo.reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		d := bo.next()
		if m.cur.Load() == nil {
			m.log.Warn("first certificate fetch failed; retrying (no certificate to serve yet)", "err", err, "retry_in", d)
		} else {
			m.log.Warn("certificate fetch failed; the current certificate stays in service", "err", err, "retry_in", d)
		}
		if !m.sleep(ctx, d) {
			return
		}
	}
}

// renew has key's CSR signed, checks the response and installs it.
func (m *Manager) renew(ctx context.Context, key privateKey, trigger time.Time) error {
	sent := time.Now()
	m.met.requests.Inc()
	elems, err := m.ca.sign(ctx, key.csr)
	got := time.Now()
	m.met.latencyMS.Add(float64(got.Sub(sent)) / float64(time.Millisecond))
	if err != nil {
		m.met.failures.Inc()
		return err
	}
	ch, err := m.chains.parse(elems)
	if err == nil {
		err = m.chains.check(ch, key.signer.Public(), m.spiffeID, m.cfg.Clock.Now())
	}
	if err != nil {
		m.met.failures.Inc()
		m.met.badResponses.Inc()
		return fmt.Errorf("CA response for %s rejected: %w", m.spiffeID, err)
	}
	w := m.newWorkload(key, ch)
	// OUTPUT_CERTS first: whoever learns of the new certificate from SDS finds it on disk too.
	m.writeOutput(w)
	m.install(w)
	m.lastLocal.Store(int64(sent.Sub(trigger) + time.Since(got)))
	m.renewals.Add(1)
	return nil
}

func (m *Manager) newWorkload(key privateKey, ch *Chain) *workload {
	der := make([][]byte, 0, 1+len(ch.Intermediates))
	der = append(der, ch.Leaf.Raw)
	for _, c := range ch.Intermediates {
		der = append(der, c.Raw)
	}
	ratio := graceRatio(m.cfg.GracePeriodRatio, m.cfg.GracePeriodRatioJitter, rand.Float64())
	return &workload{
		cert:         &tls.Certificate{Certificate: der, PrivateKey: key.signer, Leaf: ch.Leaf},
		chainPEM:     ch.ChainPEM,
		keyPEM:       key.pem,
		rootPEM:      ch.RootPEM,
		notAfter:     ch.Leaf.NotAfter,
		rootNotAfter: ch.Root.NotAfter,
		rotateAt:     rotationTime(ch.Leaf.NotBefore, ch.Leaf.NotAfter, ratio),
	}
}

// install makes w current and publishes default, ROOTCA when the root changed, and aliases.
// The previous certificate is served until this moment: there is no gap.
func (m *Manager) install(w *workload) {
	m.aliasMu.Lock()
	prev := m.cur.Swap(w)
	sec := certSecret(ResourceDefault, w.chainPEM, w.keyPEM)
	m.store.publish(sec)
	if prev == nil || !bytes.Equal(prev.rootPEM, w.rootPEM) {
		m.store.publish(m.extras.rootCASecret(w.rootPEM))
	}
	for name := range m.aliases {
		m.store.publish(certSecret(name, w.chainPEM, w.keyPEM))
	}
	m.aliasMu.Unlock()
	m.readyOnce.Do(func() { close(m.ready) })
}

// fileWorkload is called by the file watcher with a newly loaded file-mounted workload pair.
func (m *Manager) fileWorkload(kp *tls.Certificate, chainPEM, keyPEM []byte) {
	w := &workload{cert: kp, chainPEM: chainPEM, keyPEM: keyPEM, notAfter: kp.Leaf.NotAfter}
	m.aliasMu.Lock()
	if prev := m.cur.Swap(w); prev != nil {
		w.rootPEM, w.rootNotAfter = prev.rootPEM, prev.rootNotAfter
	}
	for name := range m.aliases {
		m.store.publish(certSecret(name, chainPEM, keyPEM))
	}
	m.aliasMu.Unlock()
	m.readyOnce.Do(func() { close(m.ready) })
}

// secret returns the current value of a requested resource (nil when not ready yet), loading and
// watching file resources on first request. Unknown names are served the workload certificate,
// as Istio does.
func (m *Manager) secret(name string) (*secretValue, error) {
	switch {
	case strings.HasPrefix(name, fileCertPrefix) || strings.HasPrefix(name, fileRootPrefix):
		return m.files.ensure(name)
	case m.cfg.ServeOnlyFiles:
		return nil, fmt.Errorf("resource %q: only file-cert: and file-root: resources are served here", name)
	case name == ResourceDefault || name == ResourceRootCA:
		return m.store.get(name), nil
	}
	m.aliasMu.Lock()
	defer m.aliasMu.Unlock()
	m.aliases[name] = struct{}{}
	if v := m.store.get(name); v != nil {
		return v, nil
	}
	w := m.cur.Load()
	if w == nil {
		return nil, nil
	}
	m.store.publish(certSecret(name, w.chainPEM, w.keyPEM))
	return m.store.get(name), nil
}

func (m *Manager) watch(ch chan struct{}) func() { return m.store.watch(ch) }

// expiries feeds istio_agent_cert_expiry_seconds.
func (m *Manager) expiries() map[string]float64 {
	w := m.cur.Load()
	if w == nil {
		return nil
	}
	now := m.cfg.Clock.Now()
	out := map[string]float64{ResourceDefault: w.notAfter.Sub(now).Seconds()}
	if !w.rootNotAfter.IsZero() {
		out[ResourceRootCA] = w.rootNotAfter.Sub(now).Seconds()
	}
	return out
}

// sleepUntil waits until the clock reaches t; false when ctx ended first.
func (m *Manager) sleepUntil(ctx context.Context, t time.Time) bool {
	for {
		d := t.Sub(m.cfg.Clock.Now())
		if d <= 0 {
			return true
		}
		t := m.cfg.Clock.NewTimer(d)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

func (m *Manager) sleep(ctx context.Context, d time.Duration) bool {
	return m.sleepUntil(ctx, m.cfg.Clock.Now().Add(d))
}

// parseLeaf is x509.ParseCertificate on the first DER of kp, cached in kp.Leaf.
func parseLeaf(kp *tls.Certificate) error {
	if kp.Leaf != nil {
		return nil
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return err
	}
	kp.Leaf = leaf
	return nil
}
