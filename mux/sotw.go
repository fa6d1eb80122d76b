package mux

import (
	"maps"

	"google.golang.org/grpc/mem"

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
	// An answer to a response an earlier upstream stream (or the restored state) sent, before
	// the new stream has carried one of its type, naming what the replay named: Istiod
	// (pkg/xds/server.go ShouldRespond, 1.30.3) would take it without its nonce for a new
	// subscription and push the whole type again, and with it ignore it as expired. Not
	// forwarded; it still updates the subscription a later replay sends.
	bare := false
	if r.Nonce != "" && t.nonceGen < s.gen && t.lastReq.Data != nil {
		same, err := sameRequestNames(p, t.lastReq.Data, f.Data)
		if err != nil {
			f.Free()
			return fastpath.Frame{}, "", err
		}
		bare = same
	}
	// The latest request holds the whole subscription (names and last accepted version): it is
	// what a reconnect replays. Keep a reference to the received buffers, no copy.
	t.lastReq.Free()
	f.Data.Ref()
	t.lastReq = fastpath.Frame{Data: f.Data}
	if bare {
		f.Free()
		return fastpath.Frame{}, r.TypeURL, nil
	}
	out, err := rewriteStaleNonce(s, p, t, f, r.Nonce, fastpath.RequestNonceField)
	return out, r.TypeURL, err
}

// sameRequestNames reports whether two state-of-the-world requests name the same set of
// resources, as Istiod compares them (a set: order and repeats aside).
func sameRequestNames(p *fastpath.Peeker, a, b mem.BufferSlice) (bool, error) {
	var r fastpath.Request
	names := func(d mem.BufferSlice) (map[string]struct{}, error) {
		m := map[string]struct{}{}
		err := p.PeekRequestNames(d, &r, func(n []byte) { m[string(n)] = struct{}{} })
		return m, err
	}
	na, err := names(a)
	if err != nil {
		return false, err
	}
	nb, err := names(b)
	if err != nil {
		return false, err
	}
	return maps.Equal(na, nb), nil
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
