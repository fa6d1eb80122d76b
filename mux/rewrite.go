package mux

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"

	"github.com/wingman-mesh/wingman/fastpath"
)

// A rewritten type (Config.Rewriters; cmd registers the Wasm remote-load rewrite for ECDS) has,
// per session, a queue and a goroutine of its own (rewriteLoop), never the upstream receive
// goroutine: a rewrite may wait (a module fetch), and other types on the stream, and other
// streams, keep flowing meanwhile. The type's responses still reach the client in the order
// Istiod sent them. In state of the world a newer response supersedes an older one not yet
// forwarded (the older one's rewrite is cancelled and its result dropped; never the reverse), as
// the out queue coalesces; Delta responses are incremental and are all forwarded, in order,
// except those of an upstream stream that was lost (the replay has Istiod send them again),
// whose rewrite is cancelled. The nonce Envoy ACKs is the one of the response it got, so
// Istiod's ACK or NACK always belongs to what Envoy holds; a response the rewrite refuses is
// NACKed upstream by the agent, with the last version the client accepted, and never forwarded
// (Istio's ECDS rewrite: rewriteAndForward, but per stream, not global: istio/istio#49847).
// Adding a rewritten type is one Rewriter registered in Config.Rewriters; nothing here names a type.

// rewriteJob is one response waiting for its type's rewrite.
type rewriteJob struct {
	frame          fastpath.Frame
	nonce, version string
	pd             *pendingDelta
	gen            uint64 // upstream generation it came on
	seq            uint64
}

// rewriteQueue holds a session's responses of one rewritten type between the receive goroutine
// and rewriteLoop.
type rewriteQueue struct {
	typeURL string   // immutable
	rw      Rewriter // immutable

	mu     sync.Mutex // guards the fields below
	jobs   []rewriteJob
	seq    uint64             // of the newest job queued
	cancel context.CancelFunc // of the rewrite in progress, nil when none
	curGen uint64             // upstream generation of the rewrite in progress
	wake   chan struct{}      // capacity 1, made on first use
	closed bool               // rewriteLoop has ended: later responses are freed at once
}

func (q *rewriteQueue) wakeLocked() chan struct{} {
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
	}
	return q.wake
}

// queueRewrite hands a response of q's type to its rewriteLoop. It never waits.
func (s *session) queueRewrite(q *rewriteQueue, f fastpath.Frame, nonce, version string, pd *pendingDelta, gen uint64) error {
	s.mu.Lock()
	t := s.typeLocked(q.typeURL)
	t.lastNonce, t.nonceGen = nonce, gen
	s.mu.Unlock()
	q.mu.Lock()
	if q.closed { // the session is ending
		q.mu.Unlock()
		f.Free()
		s.recyclePD(pd)
		return nil
	}
	q.seq++
	job := rewriteJob{frame: f, nonce: nonce, version: version, pd: pd, gen: gen, seq: q.seq}
	// Superseded (state of the world: any older response; Delta: one from a lost upstream
	// stream, which the replay has Istiod send again): dropped before its rewrite starts, or
	// its rewrite cancelled.
	delta := s.proto.delta()
	var dropped []rewriteJob
	kept := q.jobs[:0]
	for _, old := range q.jobs {
		if !delta || old.gen != gen {
			dropped = append(dropped, old)
			continue
		}
		kept = append(kept, old)
	}
	clear(q.jobs[len(kept):])
	q.jobs = kept
	if q.cancel != nil && (!delta || q.curGen != gen) {
		q.cancel()
	}
	q.jobs = append(q.jobs, job)
	signal(q.wakeLocked())
	q.mu.Unlock()
	for _, old := range dropped {
		old.frame.Free()
		s.recyclePD(old.pd)
	}
	return nil
}

// next waits for the oldest queued job and returns it with the context its rewrite runs under.
func (q *rewriteQueue) next(ctx context.Context) (rewriteJob, context.Context, bool) {
	for {
		q.mu.Lock()
		if len(q.jobs) > 0 {
			job := q.jobs[0]
			q.jobs[0] = rewriteJob{}
			q.jobs = q.jobs[1:]
			jctx, cancel := context.WithCancel(ctx)
			q.cancel, q.curGen = cancel, job.gen
			q.mu.Unlock()
			return job, jctx, true
		}
		wake := q.wakeLocked()
		q.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return rewriteJob{}, nil, false
		}
	}
}

// finish ends the rewrite in progress and reports whether a newer job superseded it.
func (q *rewriteQueue) finish(job rewriteJob, delta bool) (superseded bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cancel()
	q.cancel = nil
	return !delta && q.seq != job.seq
}

// close frees what is still queued when the session ends, and what comes after.
func (q *rewriteQueue) close() {
	q.mu.Lock()
	q.closed = true
	for _, j := range q.jobs {
		j.frame.Free()
	}
	q.jobs = nil
	q.mu.Unlock()
}

// rewriteLoop rewrites q's responses in order and forwards them, or NACKs them upstream.
func (s *session) rewriteLoop(ctx context.Context, q *rewriteQueue) error {
	defer q.close()
	var p fastpath.Peeker
	delta := s.proto.delta()
	for {
		job, jctx, ok := q.next(ctx)
		if !ok {
			return nil
		}
		out, err := q.rw(jctx, job.frame, delta)
		cancelled := jctx.Err() != nil
		superseded := q.finish(job, delta)
		s.mu.Lock()
		stale := job.gen != s.gen // the upstream stream it came on is gone: the replay re-fetches
		s.mu.Unlock()
		if cancelled || superseded || stale {
			if err == nil {
				out.Free()
			}
			s.recyclePD(job.pd)
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		if err != nil {
			s.recyclePD(job.pd)
			if err := s.nackRewrite(ctx, &p, q.typeURL, job, err); err != nil {
				return err
			}
			continue
		}
		s.mu.Lock()
		s.proto.recordResponseLocked(s.typeLocked(q.typeURL), job.nonce, job.version, job.pd)
		s.mu.Unlock()
		if err := s.outQ.push(ctx, item{typeURL: q.typeURL, frame: out, coalesce: !delta}); err != nil {
			return err
		}
	}
}

// nackRewrite tells Istiod the client will not get this response. State of the world carries
// the last version the client accepted (Istio's ECDS rewrite: ecdsLastAckVersion), Delta the
// nonce only.
func (s *session) nackRewrite(ctx context.Context, p *fastpath.Peeker, typeURL string, job rewriteJob, cause error) error {
	s.logger().Warn("NACKing a response its rewrite refused", "type", typeURL, "nonce", job.nonce, "err", cause)
	version := ""
	s.mu.Lock()
	if t := s.types[typeURL]; t != nil && t.lastReq.Data != nil {
		var r fastpath.Request
		if p.PeekRequest(t.lastReq.Data, &r) == nil {
			version = r.Version
		}
	}
	s.mu.Unlock()
	nack := &fastpath.Status{Code: int32(codes.Internal), Message: cause.Error()}
	// Not coalescing: it must not replace a request of the client's waiting in the queue.
	return s.reqQ.push(ctx, item{typeURL: typeURL, frame: fastpath.FrameOf(s.proto.ack(typeURL, job.nonce, version, nack))})
}
