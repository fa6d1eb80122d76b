package mux

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"

	"github.com/wingman-mesh/wingman/fastpath"
)

// The ECDS rewrite (Config.RewriteECDS) may wait on a Wasm module fetch, so it runs on its own
// goroutine per session (ecdsLoop), never on the upstream receive goroutine: other types on
// the stream, and other streams, keep flowing while a module downloads. ECDS responses of one
// stream still reach the client in the order Istiod sent them. In state of the world a newer
// response supersedes an older one not yet forwarded (the older one's rewrite is cancelled and
// its result dropped; never the reverse), as the out queue coalesces; Delta responses are
// incremental and are all forwarded, in order, except those of an upstream stream that was
// lost (the replay has Istiod send them again), whose rewrite is cancelled. The nonce Envoy ACKs is the one of the response
// it got, so Istiod's ACK or NACK always belongs to what Envoy holds; a response the rewrite
// cannot decode is NACKed upstream by the agent, with the last version the client accepted,
// and never forwarded (Istio: rewriteAndForward, but per stream, not global: istio/istio#49847).

// ecdsJob is one ECDS response waiting for the rewrite.
type ecdsJob struct {
	frame          fastpath.Frame
	nonce, version string
	pd             *pendingDelta
	gen            uint64 // upstream generation it came on
	seq            uint64
}

// ecdsQueue holds a session's ECDS responses between the receive goroutine and ecdsLoop. The
// zero value is ready.
type ecdsQueue struct {
	mu     sync.Mutex // guards the fields below
	jobs   []ecdsJob
	seq    uint64             // of the newest job queued
	cancel context.CancelFunc // of the rewrite in progress, nil when none
	curGen uint64             // upstream generation of the rewrite in progress
	wake   chan struct{}      // capacity 1, made on first use
	closed bool               // ecdsLoop has ended: later responses are freed at once
}

func (q *ecdsQueue) wakeLocked() chan struct{} {
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
	}
	return q.wake
}

// queueECDS hands an ECDS response to ecdsLoop. It never waits.
func (s *session) queueECDS(f fastpath.Frame, nonce, version string, pd *pendingDelta, gen uint64) error {
	s.mu.Lock()
	t := s.typeLocked(fastpath.ExtensionConfigType)
	t.lastNonce, t.nonceGen = nonce, gen
	s.mu.Unlock()
	q := &s.ecds
	q.mu.Lock()
	if q.closed { // the session is ending
		q.mu.Unlock()
		f.Free()
		s.recyclePD(pd)
		return nil
	}
	q.seq++
	job := ecdsJob{frame: f, nonce: nonce, version: version, pd: pd, gen: gen, seq: q.seq}
	// Superseded (state of the world: any older response; Delta: one from a lost upstream
	// stream, which the replay has Istiod send again): dropped before its rewrite starts, or
	// its rewrite cancelled.
	delta := s.proto.delta()
	var dropped []ecdsJob
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
func (q *ecdsQueue) next(ctx context.Context) (ecdsJob, context.Context, bool) {
	for {
		q.mu.Lock()
		if len(q.jobs) > 0 {
			job := q.jobs[0]
			q.jobs[0] = ecdsJob{}
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
			return ecdsJob{}, nil, false
		}
	}
}

// finish ends the rewrite in progress and reports whether a newer job superseded it.
func (q *ecdsQueue) finish(job ecdsJob, delta bool) (superseded bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cancel()
	q.cancel = nil
	return !delta && q.seq != job.seq
}

// close frees what is still queued when the session ends, and what comes after.
func (q *ecdsQueue) close() {
	q.mu.Lock()
	q.closed = true
	for _, j := range q.jobs {
		j.frame.Free()
	}
	q.jobs = nil
	q.mu.Unlock()
}

// ecdsLoop rewrites queued ECDS responses in order and forwards them, or NACKs them upstream.
func (s *session) ecdsLoop(ctx context.Context) error {
	defer s.ecds.close()
	var p fastpath.Peeker
	delta := s.proto.delta()
	for {
		job, jctx, ok := s.ecds.next(ctx)
		if !ok {
			return nil
		}
		out, err := s.p.cfg.RewriteECDS(jctx, job.frame, delta)
		cancelled := jctx.Err() != nil
		superseded := s.ecds.finish(job, delta)
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
			if err := s.nackECDS(ctx, &p, job, err); err != nil {
				return err
			}
			continue
		}
		s.mu.Lock()
		s.proto.recordResponseLocked(s.typeLocked(fastpath.ExtensionConfigType), job.nonce, job.version, job.pd)
		s.mu.Unlock()
		if err := s.outQ.push(ctx, item{typeURL: fastpath.ExtensionConfigType, frame: out, coalesce: !delta}); err != nil {
			return err
		}
	}
}

// nackECDS tells Istiod the client will not get this response. State of the world carries the
// last version the client accepted (Istio: ecdsLastAckVersion), Delta the nonce only.
func (s *session) nackECDS(ctx context.Context, p *fastpath.Peeker, job ecdsJob, cause error) error {
	s.logger().Warn("NACKing ECDS response the Wasm rewrite cannot decode", "nonce", job.nonce, "err", cause)
	version := ""
	s.mu.Lock()
	if t := s.types[fastpath.ExtensionConfigType]; t != nil && t.lastReq.Data != nil {
		var r fastpath.Request
		if p.PeekRequest(t.lastReq.Data, &r) == nil {
			version = r.Version
		}
	}
	s.mu.Unlock()
	nack := &fastpath.Status{Code: int32(codes.Internal), Message: cause.Error()}
	// Not coalescing: it must not replace a request of the client's waiting in the queue.
	return s.reqQ.push(ctx, item{typeURL: fastpath.ExtensionConfigType,
		frame: fastpath.FrameOf(s.proto.ack(fastpath.ExtensionConfigType, job.nonce, version, nack))})
}
