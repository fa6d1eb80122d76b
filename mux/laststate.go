package mux

import (
	"google.golang.org/grpc/mem"

	"github.com/wingman-mesh/wingman/fastpath"
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
	// be applied (the caller must not modify them), or none.
	Responses(delta bool, nodeID, typeURL string) [][]byte
	// Live is called once, when the first upstream stream to Istiod opens: restored state is no
	// longer served to new subscriptions; Istiod's responses replace what was served.
	Live()
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
// of their nonce once an upstream stream is open, and that stream starts with a replay of the
// client's state (newGeneration), as after a reconnect: Istiod then sends what changed, and its
// responses supersede these in the queue (coalesced or merged) or follow them.
func (s *session) serveRestoredLocked(p *fastpath.Peeker, typeURL string) {
	rs := s.p.cfg.Restore
	if rs == nil || s.gen != 0 || s.p.live.Load() || s.nodeID == "" {
		return
	}
	t := s.typeLocked(typeURL)
	if t.agent || t.restored {
		return
	}
	t.restored = true
	for _, b := range rs.Responses(s.proto.delta(), s.nodeID, typeURL) {
		f := fastpath.FrameOf(b)
		var pd *pendingDelta
		if s.proto.delta() {
			pd = s.takePDLocked()
		}
		_, nonce, version, err := s.proto.peekResponse(p, f, pd)
		if err != nil { // checked when the snapshot was loaded; never forwarded malformed
			if pd != nil {
				s.freePD = append(s.freePD, pd)
			}
			s.log.Warn("restored response not served", "type", typeURL, "err", err)
			continue
		}
		t.lastNonce, t.nonceGen = nonce, 0
		s.proto.recordResponseLocked(t, nonce, version, pd)
		s.restoredAny = true
		// Never waits: SotW coalesces; Delta merges (restored resources all carry names).
		if ok, _ := s.outQ.tryPush(item{typeURL: typeURL, frame: f, coalesce: !s.proto.delta(), merge: s.proto.delta()}); !ok {
			s.log.Warn("restored response not queued", "type", typeURL)
		}
	}
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
