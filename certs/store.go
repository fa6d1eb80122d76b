package certs

import (
	"sync"
)

// secretValue is one version of a named secret, encoded once and shared by every stream.
// Immutable.
type secretValue struct {
	res []byte // the DiscoveryResponse.resources field: tag, length and the Any of the Secret
	gen uint64 // store generation at publication; strictly increasing per name
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

// publish encodes sec as a response resource (outside the lock) and makes it the value of
// sec.name, then wakes every watcher without blocking: each watcher's channel holds one pending
// wake-up, so a slow stream coalesces pushes and never delays the others.
func (s *store) publish(sec secret) {
	v := &secretValue{res: resourceField(sec.body)}
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
