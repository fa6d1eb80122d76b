package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Hooks for the last-state snapshot (laststate, issue 31): what it saves of the workload
// certificate, and how a restored one is put in service.

// Current returns the workload certificate chain, key and roots being served (PEM; shared, not
// to be modified); false before the first.
func (m *Manager) Current() (chain, key, roots []byte, ok bool) {
	w := m.cur.Load()
	if w == nil || w.rotateAt.IsZero() { // file-mounted certificates are not the agent's to save
		return nil, nil, nil, false
	}
	return w.chainPEM, w.keyPEM, w.rootPEM, true
}

// Subscribe signals ch (without blocking) whenever a secret is published; cancel stops it.
func (m *Manager) Subscribe(ch chan struct{}) (cancel func()) { return m.watch(ch) }

// ErrAlreadyServing is Seed's refusal once a certificate is in service.
var ErrAlreadyServing = errors.New("certs: a workload certificate is already in service")

// Seed puts restored certificate material in service before the first certificate from the CA:
// chain and key must match, the leaf must name this workload's SPIFFE identity. It is due for
// rotation at once, so the CA is asked for a new one right away (with the usual backoff) and
// that one replaces it as soon as it is signed. The caller has checked validity and the roots
// (laststate.Snapshot.Check). Refused once any certificate is in service.
func (m *Manager) Seed(chainPEM, keyPEM, rootPEM []byte) error {
	kp, err := tls.X509KeyPair(chainPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("certs: restored certificate: %w", err)
	}
	leaf := kp.Leaf
	named := false
	for _, u := range leaf.URIs {
		named = named || u.String() == m.spiffeID
	}
	if !named {
		return fmt.Errorf("certs: restored certificate does not name %s", m.spiffeID)
	}
	w := &workload{cert: &kp, chainPEM: chainPEM, keyPEM: keyPEM, rootPEM: rootPEM,
		notAfter: leaf.NotAfter, rotateAt: m.cfg.Clock.Now()}
	if blk, _ := pem.Decode(rootPEM); blk != nil {
		if root, err := x509.ParseCertificate(blk.Bytes); err == nil {
			w.rootNotAfter = root.NotAfter
		}
	}
	m.aliasMu.Lock()
	if !m.cur.CompareAndSwap(nil, w) { // install swaps under aliasMu too: no CA certificate is overwritten
		m.aliasMu.Unlock()
		return ErrAlreadyServing
	}
	m.store.publish(certSecret(ResourceDefault, w.chainPEM, w.keyPEM))
	m.store.publish(m.extras.rootCASecret(w.rootPEM))
	for name := range m.aliases {
		m.store.publish(certSecret(name, w.chainPEM, w.keyPEM))
	}
	m.aliasMu.Unlock()
	m.readyOnce.Do(func() { close(m.ready) })
	m.log.Info("serving the restored workload certificate until the CA signs a new one", "not_after", leaf.NotAfter)
	return nil
}
