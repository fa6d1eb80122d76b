package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/fastpath"
)

// downstream is what a session needs of the client's stream (an h2grpc.ServerStream). SendMsg
// and Write return only once their bytes are written to the connection: while they wait, newer
// responses coalesce or merge in the queue, so a slow client is handed only the latest.
type downstream interface {
	RecvMsg() (mem.BufferSlice, error)
	SendMsg(mem.BufferSlice) error
	BeginMsg(size int) error // a message sent in pieces (cut-through)
	// WriteBuffers sends the next pieces of that message, flushing once per batch the send
	// windows allow, not once per piece.
	WriteBuffers(pieces [][]byte) error
	Context() context.Context
}

// protocol is what differs between state-of-the-world and Delta xDS. Methods named ...Locked
// run with the session's mu held.
type protocol interface {
	delta() bool
	// onRequestLocked does the bookkeeping for a client request and returns the frame to
	// forward (f itself or a rewrite of it; f is consumed; none, Data nil, when nothing is to
	// go upstream) and the request's type URL.
	onRequestLocked(s *session, p *fastpath.Peeker, f fastpath.Frame) (out fastpath.Frame, typeURL string, err error)
	// peekResponse reads a response's type URL, nonce and version; for Delta it also records
	// the resource names and versions into pd (which may be nil for the agent's own types).
	peekResponse(p *fastpath.Peeker, f fastpath.Frame, pd *pendingDelta) (typeURL, nonce, version string, err error)
	// recordResponseLocked remembers a response about to be forwarded.
	recordResponseLocked(t *typeState, nonce, version string, pd *pendingDelta)
	// subscribe builds the agent's first request for one of its own types.
	subscribe(typeURL string) []byte
	// ack builds the agent's ACK (nack == nil) or NACK for a consumed response.
	ack(typeURL, nonce, version string, nack *fastpath.Status) []byte
	// rememberAckLocked keeps what replays an agent subscription after it ACKed a version.
	rememberAckLocked(t *typeState, typeURL, version string)
	// replayLocked builds the request that re-subscribes one type on a new upstream stream, or
	// nil when there is nothing to subscribe.
	replayLocked(p *fastpath.Peeker, typeURL string, t *typeState) ([]byte, error)
	// nodeField is the request field number that holds the node.
	nodeField() int
}

// session is one downstream stream and its upstream counterpart.
type session struct {
	p     *Proxy        // immutable
	proto protocol      // immutable
	down  downstream    // immutable
	reqQ  *queue        // requests to upstream
	outQ  *queue        // responses to downstream
	ready chan struct{} // closed when the first request has been read (log and node are set)

	mu      sync.Mutex   // guards the fields below
	log     *slog.Logger // carries the client's node id once the first request is read
	node    []byte       // the encoded node of the client's first request
	gen     uint64       // generation of the current upstream stream (0: none yet)
	types   map[string]*typeState
	order   []string // type URLs in first-seen order: replays go in the client's order
	freePD  []*pendingDelta
	claimed bool // this session carries the agent's own subscriptions

	nodeID      string         // the client's node id (laststate.go)
	restoredAny bool           // restored responses were queued: the first upstream stream replays
	rec         StreamRecorder // nil without Config.Recorder; set before the first response

	rewrites map[string]*rewriteQueue // immutable map, by type URL: Config.Rewriters' queues (rewrite.go)

	streaming  atomic.Pointer[streamItem] // the response being forwarded cut-through, if any
	streamPeak atomic.Int64               // the most a cut-through response ever held

	// sendLoop's own scratch, reused from push to push (sendStream): the pieces taken from a
	// cut-through response and their bytes as one batch. Grown afresh per push they cost about
	// five allocations a push (bench's TestGateAllocBudget).
	sendPieces []mem.Buffer
	sendBatch  [][]byte
}

func newSession(p *Proxy, proto protocol, down downstream) *session {
	s := &session{
		p: p, proto: proto, down: down, log: p.cfg.Logger,
		reqQ:  newQueue(p.cfg.QueueBytes),
		outQ:  newQueue(p.cfg.QueueBytes),
		ready: make(chan struct{}),
		types: map[string]*typeState{},
	}
	if proto.delta() {
		s.outQ.merge = deltaMerger() // pending responses of a type merge: Istiod is never held up
	}
	if len(p.cfg.Rewriters) > 0 {
		s.rewrites = make(map[string]*rewriteQueue, len(p.cfg.Rewriters))
		for typeURL, rw := range p.cfg.Rewriters {
			s.rewrites[typeURL] = &rewriteQueue{typeURL: typeURL, rw: rw}
		}
	}
	return s
}

// errClientDone ends a session when the client half-closes.
var errClientDone = errors.New("client closed the stream")

// errUpstreamViolation marks a malformed message from Istiod.
type errUpstreamViolation struct{ err error }

func (e errUpstreamViolation) Error() string {
	return "malformed message from Istiod: " + e.err.Error()
}
func (e errUpstreamViolation) Unwrap() error { return e.err }

// run serves the session until the client goes away or it must end. The receive loop runs on
// a goroutine owned by the proxy (grpc unblocks it only once the handler returns).
func (s *session) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	s.p.goTracked(func() { cancel(s.recvLoop(ctx)) })
	wg.Go(func() { cancel(s.sendLoop(ctx)) })
	wg.Go(func() { cancel(s.upstreamLoop(ctx)) })
	for _, q := range s.rewrites {
		wg.Go(func() { cancel(s.rewriteLoop(ctx, q)) }) // rewrite.go
	}
	<-ctx.Done()
	wg.Wait()
	s.reqQ.close()
	s.outQ.close()
	s.mu.Lock()
	for _, t := range s.types {
		t.free()
	}
	claimed := s.claimed
	s.mu.Unlock()
	if claimed {
		s.p.agentOwner.CompareAndSwap(s, nil)
	}
	s.closeRecorder() // laststate.go
	return s.finish(context.Cause(ctx))
}

// finish turns the reason a session ended into the status the client sees, and logs it.
func (s *session) finish(cause error) error {
	var viol errUpstreamViolation
	switch {
	case errors.Is(cause, errClientDone) || errors.Is(cause, io.EOF):
		s.p.metrics.downTerm("cancelled")
		return nil
	case errors.Is(cause, context.Canceled):
		s.p.metrics.downTerm("cancelled")
		return status.FromContextError(cause).Err()
	case errors.As(cause, &viol):
		s.logger().Error("closing stream", "err", cause)
		s.p.metrics.downTerm("error")
		return status.Error(codes.Internal, cause.Error())
	}
	if _, ok := status.FromError(cause); ok {
		s.logger().Warn("closing stream", "err", cause)
		s.p.metrics.downTerm("error")
		return cause
	}
	s.logger().Warn("closing stream", "err", cause)
	s.p.metrics.downTerm("error")
	return status.Error(codes.Unavailable, cause.Error())
}

// recvLoop reads client requests and queues them for upstream.
func (s *session) recvLoop(ctx context.Context) error {
	var p fastpath.Peeker
	f := &fastpath.Frame{}
	first := true
	for {
		data, err := s.down.RecvMsg()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errClientDone
			}
			return err
		}
		f.Data = data
		s.p.metrics.requests.Inc()
		if first {
			first = false
			if err := s.readNode(&p, f.Data); err != nil {
				f.Free()
				return err
			}
			close(s.ready)
		}
		if err := s.onRequest(ctx, &p, f.Take()); err != nil {
			return err
		}
	}
}

// readNode reads the node of the client's first request, for replays and for logging.
func (s *session) readNode(p *fastpath.Peeker, data mem.BufferSlice) error {
	var id string
	var node []byte
	if s.proto.delta() {
		var r fastpath.DeltaRequest
		if err := p.PeekDeltaRequest(data, &r, nil); err != nil {
			return status.Errorf(codes.InvalidArgument, "malformed request: %v", err)
		}
		id, node = r.NodeID, r.Node
	} else {
		var r fastpath.Request
		if err := p.PeekRequest(data, &r); err != nil {
			return status.Errorf(codes.InvalidArgument, "malformed request: %v", err)
		}
		id, node = r.NodeID, r.Node
	}
	log := s.p.cfg.Logger.With("node", id, "delta", s.proto.delta())
	s.mu.Lock()
	s.node, s.log, s.nodeID = node, log, id
	s.mu.Unlock()
	s.openRecorder(id) // laststate.go
	log.Debug("stream opened")
	return nil
}

// onRequest does the bookkeeping for one client request and queues it upstream, with the
// agent's own subscriptions after the first Listener request.
func (s *session) onRequest(ctx context.Context, p *fastpath.Peeker, f fastpath.Frame) error {
	s.recordAnswer(p, f.Data) // laststate.go
	s.mu.Lock()
	out, typeURL, err := s.proto.onRequestLocked(s, p, f)
	if err != nil {
		s.mu.Unlock()
		s.logger().Warn("malformed request from client", "err", err)
		return status.Errorf(codes.InvalidArgument, "malformed request: %v", err)
	}
	if out.Data == nil { // nothing to forward (a stale Delta answer, deltaProto.onRequestLocked)
		s.mu.Unlock()
		return nil
	}
	it := item{typeURL: typeURL, frame: out, coalesce: !s.proto.delta()}
	ok, err := s.reqQ.tryPush(it)
	if err == nil && typeURL == fastpath.ListenerType {
		s.claimAgentTypesLocked()
	}
	if err == nil && s.p.cfg.Restore != nil {
		s.serveRestoredLocked(typeURL) // laststate.go
	}
	s.mu.Unlock()
	if err != nil || ok {
		return err
	}
	return s.reqQ.push(ctx, it) // a Delta request waiting for room: back-pressure on the client
}

// claimAgentTypesLocked subscribes the agent's own types on this session if no other session
// carries them.
func (s *session) claimAgentTypesLocked() {
	if s.claimed || (len(s.p.cfg.AgentTypes) == 0 && !s.p.cfg.ReportHealth) || !s.p.agentOwner.CompareAndSwap(nil, s) {
		return
	}
	s.claimed = true
	s.pushHealthLocked()
	for _, typeURL := range s.p.agentTypeOrder {
		t := s.typeLocked(typeURL)
		t.agent = true
		s.proto.rememberAckLocked(t, typeURL, "")
		// Coalescing: never waits, so it cannot block on a full queue.
		_, _ = s.reqQ.tryPush(item{typeURL: typeURL, frame: fastpath.FrameOf(s.proto.subscribe(typeURL)), coalesce: true})
	}
}

func (s *session) logger() *slog.Logger {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log
}

// typeLocked returns the state of a type, creating it.
func (s *session) typeLocked(typeURL string) *typeState {
	t := s.types[typeURL]
	if t == nil {
		t = &typeState{}
		s.types[typeURL] = t
		s.order = append(s.order, typeURL)
	}
	return t
}

// sendLoop writes queued responses to the client. Each write returns once it is on the
// connection, so while the client is slow newer responses coalesce or merge in the queue.
func (s *session) sendLoop(ctx context.Context) error {
	for {
		it, err := s.outQ.pop(ctx)
		if err != nil {
			return err
		}
		if it.stream != nil {
			err = s.sendStream(ctx, it.stream) // cutthrough.go
		} else {
			s.recordSend(it.frame.Data) // laststate.go
			err = s.down.SendMsg(it.frame.Data)
			it.frame.Free()
		}
		if err != nil {
			return err
		}
		s.p.metrics.responses.Inc()
	}
}

// upstreamLoop keeps an upstream stream open for the session's life, replaying the
// subscriptions on every new one.
func (s *session) upstreamLoop(ctx context.Context) error {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	delay := s.p.cfg.Backoff.Base
	for {
		sctx, scancel := context.WithCancelCause(ctx)
		up, err := s.p.up.open(sctx, s.proto.delta())
		if err == nil {
			start := time.Now()
			var gen uint64
			if gen, err = s.newGeneration(); err == nil {
				err = s.pump(sctx, scancel, up, gen)
			}
			up.Close()
			if time.Since(start) > 5*time.Second {
				delay = s.p.cfg.Backoff.Base // it was up for a while: start the backoff again
			}
		} else {
			s.p.metrics.upFailures.Inc()
		}
		scancel(nil)
		if ctx.Err() != nil {
			return nil
		}
		var viol errUpstreamViolation
		if errors.As(err, &viol) {
			return err
		}
		s.p.metrics.upTerm(err)
		if s.p.cfg.CloseOnUpstreamLoss {
			return err
		}
		level := slog.LevelInfo // Istiod restarts and connection resets are routine
		if c := status.Code(err); c != codes.Unavailable && c != codes.Canceled && c != codes.OK {
			level = slog.LevelWarn // e.g. Unauthenticated: the client keeps its stream but gets nothing new
		}
		s.logger().Log(ctx, level, "upstream stream lost; reconnecting", "err", err, "backoff", delay)
		wait := time.Duration(float64(delay) * (0.5 + rand.Float64())) // ±50% jitter
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		delay = min(2*delay, s.p.cfg.Backoff.Max)
	}
}

// newGeneration starts the bookkeeping of a new upstream stream. After the first stream it
// discards the requests queued for the lost one and queues, in the client's order, one request
// per type that re-subscribes it as the client last asked. Requests the client sends from now
// on are checked against the new generation (see rewriteStaleNonce).
func (s *session) newGeneration() (uint64, error) {
	var p fastpath.Peeker
	s.p.upstreamLive() // laststate.go
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	if s.gen == 1 && !s.restoredAny { // after restored state, the first stream replays it too
		return s.gen, nil
	}
	s.reqQ.drain()
	for _, typeURL := range s.order {
		b, err := s.proto.replayLocked(&p, typeURL, s.types[typeURL])
		if err != nil {
			return 0, fmt.Errorf("replay %s: %w", typeURL, err)
		}
		if b == nil {
			continue
		}
		if _, err := s.reqQ.tryPush(item{typeURL: typeURL, frame: fastpath.FrameOf(b), coalesce: true}); err != nil {
			return 0, err
		}
	}
	s.pushHealthLocked() // the new stream is a new connection to Istiod: tell it again
	return s.gen, nil
}

// pump moves messages over one upstream stream until either direction fails.
func (s *session) pump(ctx context.Context, cancel context.CancelCauseFunc, up upstreamStream, gen uint64) error {
	var wg sync.WaitGroup
	wg.Go(func() { cancel(s.upSendLoop(ctx, up)) })
	wg.Go(func() { cancel(s.upRecvLoop(ctx, up, gen)) })
	wg.Wait()
	return context.Cause(ctx)
}

// upSendLoop writes queued requests upstream. The first message on every stream carries the
// client's node (the client sends it only once, and that request may have been coalesced).
func (s *session) upSendLoop(ctx context.Context, up upstreamStream) error {
	var p fastpath.Peeker
	first := true
	for {
		it, err := s.reqQ.pop(ctx)
		if err != nil {
			return err
		}
		if first {
			first = false
			if it.frame, err = s.withNode(&p, it.frame); err != nil {
				return err
			}
		}
		err = up.SendMsg(it.frame.Data)
		it.frame.Free()
		if err != nil {
			return err
		}
	}
}

// withNode returns f with the client's node set, when f has none.
func (s *session) withNode(p *fastpath.Peeker, f fastpath.Frame) (fastpath.Frame, error) {
	s.mu.Lock()
	node := s.node
	s.mu.Unlock()
	if node == nil {
		return f, nil
	}
	return p.WithNode(f, s.proto.nodeField(), node)
}

// onResponse handles a response received whole: the agent's own types are consumed and ACKed,
// the rest queued for the client.
func (s *session) onResponse(ctx context.Context, p *fastpath.Peeker, f fastpath.Frame, gen uint64) error {
	var pd *pendingDelta
	if s.proto.delta() {
		pd = s.takePD()
	}
	typeURL, nonce, version, err := s.proto.peekResponse(p, f, pd)
	if err != nil {
		f.Free()
		return errUpstreamViolation{err}
	}
	s.mu.Lock()
	t := s.typeLocked(typeURL)
	agent := t.agent
	s.mu.Unlock()
	if agent {
		s.recyclePD(pd)
		return s.consume(p, f, typeURL, nonce, version)
	}
	if q := s.rewrites[typeURL]; q != nil {
		return s.queueRewrite(q, f, nonce, version, pd, gen) // rewrite.go: off this goroutine, in order
	}
	s.mu.Lock()
	t.lastNonce, t.nonceGen = nonce, gen
	s.proto.recordResponseLocked(t, nonce, version, pd)
	s.mu.Unlock()
	// State-of-the-world responses coalesce and Delta ones merge per type, so neither waits: a
	// slow client holds up nothing upstream. A Delta pair the merge refuses (a resource without
	// a name) waits for room, back-pressuring Istiod on this stream only.
	return s.outQ.push(ctx, item{typeURL: typeURL, frame: f, coalesce: !s.proto.delta(), merge: s.proto.delta()})
}

// takePD returns an empty Delta record from the free list.
func (s *session) takePD() *pendingDelta {
	var pd *pendingDelta
	s.mu.Lock()
	if n := len(s.freePD); n > 0 {
		pd, s.freePD = s.freePD[n-1], s.freePD[:n-1]
	} else {
		pd = &pendingDelta{}
	}
	s.mu.Unlock()
	pd.reset()
	return pd
}

// noteStreamPeak remembers the most a cut-through response held.
func (s *session) noteStreamPeak(n int) {
	for {
		old := s.streamPeak.Load()
		if int64(n) <= old || s.streamPeak.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

func (s *session) recyclePD(pd *pendingDelta) {
	if pd == nil {
		return
	}
	s.mu.Lock()
	s.freePD = append(s.freePD, pd)
	s.mu.Unlock()
}

// consume hands an agent-type response to its handler and queues the agent's ACK or NACK.
func (s *session) consume(p *fastpath.Peeker, f fastpath.Frame, typeURL, nonce, version string) error {
	bodies, err := p.ResourceBodies(f.Data, s.proto.delta())
	f.Free()
	if err != nil {
		return errUpstreamViolation{err}
	}
	if len(bodies) == 0 {
		return nil // as Istio: an empty response is ignored, not ACKed
	}
	var nack *fastpath.Status
	if herr := s.p.cfg.AgentTypes[typeURL](bodies); herr != nil {
		s.logger().Warn("NACKing agent resource", "type", typeURL, "err", herr)
		nack = &fastpath.Status{Code: int32(codes.Internal), Message: herr.Error()}
	} else {
		s.mu.Lock()
		s.proto.rememberAckLocked(s.types[typeURL], typeURL, version)
		s.mu.Unlock()
	}
	_, err = s.reqQ.tryPush(item{typeURL: typeURL, frame: fastpath.FrameOf(s.proto.ack(typeURL, nonce, version, nack)), coalesce: true})
	return err
}
