package mux

import (
	"fmt"
	"io"

	"google.golang.org/grpc/mem"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/rawpool"
)

// Recorder is told what each client stream is sent and what it accepts, so that the last state a
// client accepted can be kept (laststate, issue 31). Its methods must not block: they run on the
// streams' goroutines.
type Recorder interface {
	// Stream is called once per client stream, after its first request, with its node id.
	Stream(delta bool, nodeID string) StreamRecorder
}

// StreamRecorder hears one client stream. Calls come in the order of the stream's events: a
// response's pieces before the client can answer it.
type StreamRecorder interface {
	// Message: a response of size bytes is about to be sent to the client.
	Message(size int)
	// Piece is the response's next bytes; the recorder owns this reference and frees it.
	Piece(b mem.Buffer)
	// Answered: the client ACKed (accepted) or NACKed the response of this type and nonce.
	Answered(typeURL, nonce string, accepted bool)
	// Close: the stream has ended.
	Close()
}

// Restorer holds responses restored from an earlier run of the agent, served to clients while
// Istiod is not reachable yet (laststate, issue 31).
type Restorer interface {
	// Responses returns the restored responses of a type for a stream, in the order they are to
	// be applied, or none. The caller releases each.
	Responses(delta bool, nodeID, typeURL string) []RestoredResponse
	// Live is called once, when the first upstream stream to Istiod opens: restored state is no
	// longer served to new subscriptions; Istiod's responses replace what was served.
	Live()
}

// RestoredResponse is one restored response, read from where it is kept as it is sent, in
// pieces, like a response forwarded cut-through: never whole in memory.
type RestoredResponse interface {
	// Size is the response's length in bytes.
	Size() int
	// Open returns a reader of its bytes from the first; it may be called more than once.
	Open() io.Reader
	// Release says the response is no longer read; called once.
	Release()
}

// recordSend tells the stream's recorder about a whole response about to be sent.
func (s *session) recordSend(data mem.BufferSlice) {
	if s.rec == nil {
		return
	}
	s.rec.Message(data.Len())
	for _, b := range data {
		b.Ref()
		s.rec.Piece(b)
	}
}

// recordPiece tells the stream's recorder about the next piece of a cut-through response.
func (s *session) recordPiece(b mem.Buffer) {
	if s.rec != nil {
		b.Ref()
		s.rec.Piece(b)
	}
}

// recordAnswer tells the recorder whether the client accepted a response (a request carrying a
// response nonce). It peeks the request a second time, only when a recorder is set.
func (s *session) recordAnswer(p *fastpath.Peeker, data mem.BufferSlice) {
	if s.rec == nil {
		return
	}
	var typeURL, nonce string
	var nack bool
	if s.proto.delta() {
		var r fastpath.DeltaRequest
		if p.PeekDeltaRequest(data, &r, nil) != nil {
			return
		}
		typeURL, nonce, nack = r.TypeURL, r.Nonce, r.HasError
	} else {
		var r fastpath.Request
		if p.PeekRequest(data, &r) != nil {
			return
		}
		typeURL, nonce, nack = r.TypeURL, r.Nonce, r.HasError
	}
	if nonce != "" {
		s.rec.Answered(typeURL, nonce, !nack)
	}
}

// openRecorder starts the stream's recorder once its node is known.
func (s *session) openRecorder(nodeID string) {
	if r := s.p.cfg.Recorder; r != nil {
		s.rec = r.Stream(s.proto.delta(), nodeID)
	}
}

func (s *session) closeRecorder() {
	if s.rec != nil {
		s.rec.Close()
	}
}

// serveRestoredLocked queues the restored responses of a type the client has just subscribed to,
// while no upstream stream has opened (gen 0) and Istiod has not been reached by any stream.
// They are recorded as responses of generation 0, so the client's answers to them are stripped
// of their nonce once an upstream stream is open, and that stream starts with a replay of what
// the client was sent (newGeneration, replayLocked), as after a reconnect: Istiod then sends
// what changed, removals included, and its responses supersede these in the queue (SotW: a
// restored response not yet sent is coalesced away) or follow them.
//
// Each is read from the restorer twice, in pieces: here through fastpath.ResponseScanner for
// the bookkeeping, then by the send loop, which writes it as a cut-through response
// (streamItem, sendStream). A restored configuration is never held whole.
func (s *session) serveRestoredLocked(typeURL string) {
	rs := s.p.cfg.Restore
	if rs == nil || s.gen != 0 || s.p.live.Load() || s.nodeID == "" {
		return
	}
	t := s.typeLocked(typeURL)
	if t.agent || t.restored {
		return
	}
	t.restored = true
	delta := s.proto.delta()
	list := rs.Responses(delta, s.nodeID, typeURL)
	for i, r := range list {
		var pd *pendingDelta
		if delta {
			pd = s.takePDLocked()
		}
		nonce, version, err := scanRestored(r, typeURL, delta, pd)
		if err != nil { // checked when the snapshot was loaded; never forwarded malformed
			if pd != nil {
				s.freePD = append(s.freePD, pd)
			}
			// A Delta type's later responses build on this one: none of them is served.
			for _, r := range list[i:] {
				r.Release()
			}
			s.log.Warn("restored response not served", "type", typeURL, "err", err)
			return
		}
		t.lastNonce, t.nonceGen = nonce, 0
		s.proto.recordResponseLocked(t, nonce, version, pd)
		s.restoredAny = true
		// Never waits (a stream item counts no bytes). SotW: coalesced away by a newer response
		// of the type while it waits. Delta: never merged into; Istiod's responses follow it.
		st := newRestoredItem(r)
		ok, err := s.outQ.tryPush(item{typeURL: typeURL, stream: st, coalesce: !delta})
		if err != nil || !ok {
			if !ok && err == nil {
				st.drop() // not taken: released here
				s.log.Warn("restored response not queued", "type", typeURL)
			}
			for _, r := range list[i+1:] {
				r.Release()
			}
			return // the session is ending, or the queue is over its bound
		}
	}
}

// scanRestored reads a restored response through the scanner, a piece at a time, and returns
// its nonce and version; for Delta its names and versions go to pd.
func scanRestored(r RestoredResponse, typeURL string, delta bool, pd *pendingDelta) (nonce, version string, err error) {
	var scan fastpath.ResponseScanner
	var visit func(fastpath.NameKind, []byte, []byte)
	if pd != nil {
		visit = pd.record
	}
	size := r.Size()
	scan.Reset(delta, size, visit)
	bp := rawpool.Default.Get(min(pieceBytes, size))
	defer rawpool.Default.Put(bp)
	src := r.Open()
	for got := 0; got < size; {
		n, err := io.ReadFull(src, (*bp)[:min(len(*bp), size-got)])
		if err != nil {
			return "", "", err
		}
		if err := scan.Feed((*bp)[:n]); err != nil {
			return "", "", err
		}
		got += n
	}
	var got string
	if delta {
		var resp fastpath.DeltaResponse
		err = scan.FinishDelta(&resp)
		got, nonce, version = resp.TypeURL, resp.Nonce, resp.Version
		pd.nonce = nonce
	} else {
		var resp fastpath.Response
		err = scan.FinishSotW(&resp)
		got, nonce, version = resp.TypeURL, resp.Nonce, resp.Version
	}
	if err == nil && got != typeURL {
		err = fmt.Errorf("restored response of type %q served for %q", got, typeURL)
	}
	return nonce, version, err
}

// takePDLocked is takePD with mu held.
func (s *session) takePDLocked() *pendingDelta {
	var pd *pendingDelta
	if n := len(s.freePD); n > 0 {
		pd, s.freePD = s.freePD[n-1], s.freePD[:n-1]
	} else {
		pd = &pendingDelta{}
	}
	pd.reset()
	return pd
}

// upstreamLive marks Istiod reached: restored state is served no more.
func (p *Proxy) upstreamLive() {
	if p.cfg.Restore != nil && !p.live.Swap(true) {
		p.cfg.Restore.Live()
	}
}
