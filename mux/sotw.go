package mux

import (
	"github.com/wingman-mesh/wingman/fastpath"
)

// sotw is the state-of-the-world protocol. Stateless: all state is in the session.
type sotw struct{}

var _ protocol = sotw{}

func (sotw) delta() bool    { return false }
func (sotw) nodeField() int { return fastpath.RequestNodeField }

func (sotw) onRequestLocked(s *session, p *fastpath.Peeker, f fastpath.Frame) (fastpath.Frame, string, error) {
	var r fastpath.Request
	if err := p.PeekRequest(f.Data, &r); err != nil {
		f.Free()
		return fastpath.Frame{}, "", err
	}
	t := s.typeLocked(r.TypeURL)
	// The latest request holds the whole subscription (names and last accepted version): it is
	// what a reconnect replays. Keep a reference to the received buffers, no copy.
	t.lastReq.Free()
	f.Data.Ref()
	t.lastReq = fastpath.Frame{Data: f.Data}
	out, err := rewriteStaleNonce(s, p, t, f, r.Nonce, fastpath.RequestNonceField)
	return out, r.TypeURL, err
}

// rewriteStaleNonce strips a response nonce that an earlier upstream stream issued, when the
// current stream has sent nothing of this type yet: Istiod would take it for a stale ACK and
// ignore the request, losing whatever subscription change it carries.
func rewriteStaleNonce(s *session, p *fastpath.Peeker, t *typeState, f fastpath.Frame, nonce string, field int) (fastpath.Frame, error) {
	if nonce == "" || t.nonceGen >= s.gen {
		return f, nil
	}
	b, err := p.AppendWithout(nil, f.Data, func(n int) bool { return n == field })
	f.Free()
	if err != nil {
		return fastpath.Frame{}, err
	}
	return fastpath.FrameOf(b), nil
}

func (sotw) peekResponse(p *fastpath.Peeker, f fastpath.Frame, _ *pendingDelta) (string, string, string, error) {
	var r fastpath.Response
	if err := p.PeekResponse(f.Data, &r); err != nil {
		return "", "", "", err
	}
	return r.TypeURL, r.Nonce, r.Version, nil
}

func (sotw) recordResponseLocked(*typeState, string, string, *pendingDelta) {}

func (sotw) subscribe(typeURL string) []byte {
	return fastpath.AppendRequest(nil, typeURL, "", "", nil, nil, nil)
}

func (sotw) ack(typeURL, nonce, version string, nack *fastpath.Status) []byte {
	// As Istio: ACK and NACK both carry the response's version and nonce.
	return fastpath.AppendRequest(nil, typeURL, version, nonce, nil, nil, nack)
}

func (sotw) rememberAckLocked(t *typeState, typeURL, version string) {
	t.lastReq.Free()
	t.lastReq = fastpath.FrameOf(fastpath.AppendRequest(nil, typeURL, version, "", nil, nil, nil))
}

// replayLocked re-sends the latest request without its nonce, node and error: the version it
// carries is the last one the client accepted, so Istiod sends only what is newer.
func (sotw) replayLocked(p *fastpath.Peeker, _ string, t *typeState) ([]byte, error) {
	if t == nil || t.lastReq.Data == nil {
		return nil, nil
	}
	return p.AppendWithout(nil, t.lastReq.Data, func(n int) bool {
		return n == fastpath.RequestNonceField || n == fastpath.RequestNodeField || n == 6 // error_detail
	})
}
