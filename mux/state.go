package mux

import (
	"github.com/wingman-mesh/wingman/fastpath"
)

// typeState is what a session remembers of one type, to replay the subscription on a new
// upstream stream. All fields are guarded by the session's mu.
type typeState struct {
	agent    bool // the agent's own subscription: responses are consumed, never forwarded
	restored bool // restored responses were looked up for it (laststate.go)

	// lastNonce is the nonce of the latest response of this type seen from upstream, and
	// nonceGen the upstream generation it came from.
	lastNonce string
	nonceGen  uint64

	// State of the world: the latest request, replayed (without nonce) after a reconnect.
	lastReq fastpath.Frame

	// Delta: the subscription and the versions the client has ACKed.
	wildcard bool
	subs     map[string]struct{}
	versions map[string][]byte
	pending  []*pendingDelta // responses forwarded and not yet ACKed or NACKed, oldest first
}

// pendingDelta is the names and versions of one forwarded Delta response, applied to
// typeState.versions when the client ACKs it. Its buffers are reused from a free list.
type pendingDelta struct {
	nonce   string
	folded  []string // nonces of earlier responses folded into this one (deltafold.go)
	arena   []byte   // names and versions, back to back
	updated []span   // pairs: name, version
	removed []span
}

type span struct{ off, n int }

func (p *pendingDelta) reset() {
	p.nonce = ""
	p.folded = p.folded[:0]
	p.arena = p.arena[:0]
	p.updated = p.updated[:0]
	p.removed = p.removed[:0]
}

func (p *pendingDelta) add(b []byte) span {
	s := span{len(p.arena), len(b)}
	p.arena = append(p.arena, b...)
	return s
}

func (p *pendingDelta) bytes(s span) []byte { return p.arena[s.off : s.off+s.n] }

// record is the scanners' visitor of a Delta response's names: removals and (name, version)
// updates into p.
func (p *pendingDelta) record(k fastpath.NameKind, name, version []byte) {
	if k == fastpath.Removed {
		p.removed = append(p.removed, p.add(name))
		return
	}
	p.updated = append(p.updated, p.add(name), p.add(version))
}

// free releases what the state holds.
func (t *typeState) free() {
	t.lastReq.Free()
}
