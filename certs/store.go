package certs

import (
	"sync"
)

// secret is a named SDS secret as the manager (or a watched file) produces it: a workload
// certificate (chain and key) or, when rootPEM is set, a validation context (roots and an
// optional CRL). The SDS stream encodes it (sds_wire.go). Immutable.
type secret struct {
	name             string
	chainPEM, keyPEM []byte
	rootPEM, crl     []byte
}

// certSecret is a tls_certificate secret with the chain and key.
func certSecret(name string, chainPEM, keyPEM []byte) secret {
	return secret{name: name, chainPEM: chainPEM, keyPEM: keyPEM}
}

// rootSecret is a validation_context secret trusting rootPEM (not nil), with the CRL crl when
// not nil.
func rootSecret(name string, rootPEM, crl []byte) secret {
	if rootPEM == nil {
		rootPEM = []byte{}
	}
	return secret{name: name, rootPEM: rootPEM, crl: crl}
}

// secretValue is one published version of a named secret, shared by every stream.
type secretValue struct {
	sec  secret
	gen  uint64 // store generation at publication; strictly increasing per name
	once sync.Once
	res  []byte // set once by resource (sds_wire.go)
}

// store holds the current value of every named secret and wakes watchers on change.
// All fields are guarded by mu.
type store struct {
	mu       sync.Mutex
	gen      uint64
	vals     map[string]*secretValue
	watchers map[chan struct{}]struct{}
}

func newStore() *store {
	return &store{vals: make(map[string]*secretValue), watchers: make(map[chan struct{}]struct{})}
}

// publish makes sec the value of sec.name, then wakes every watcher without blocking: each watcher's channel holds one pending
// wake-up, so a slow stream coalesces pushes and never delays the others.
func (s *store) publish(sec secret) {
	v := &secretValue{sec: sec}
	s.mu.Lock()
	s.gen++
	v.gen = s.gen
	s.vals[sec.name] = v
	for ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

// get returns the current value of name, or nil when there is none yet.
func (s *store) get(name string) *secretValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vals[name]
}

// watch registers ch (capacity ≥ 1) for wake-ups until the returned cancel is called.
func (s *store) watch(ch chan struct{}) (cancel func()) {
	s.mu.Lock()
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}
}
