package mux

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/rawpool"
)

// Cut-through: a large response from Istiod goes to the client while it is still arriving, so
// neither the memory it holds nor the latency it adds grows with the message. Whether a message
// may go this way is known from its first bytes: the type URL of its first resource comes before
// the resource bodies (Istiod writes resources before the top-level type_url; either one
// decides). It goes through when
//   - it is longer than one piece (a smaller one is received whole, as before),
//   - its type is not one the agent keeps (its own subscriptions, a rewritten type such as ECDS),
//   - and the client's queue is empty with its send loop waiting, so it goes out at once.
// Otherwise it is received whole and queued, where state-of-the-world responses coalesce and
// Delta ones merge: a response that must wait anyway is better replaced than streamed.
//
// While it passes, fastpath.ResponseScanner reads the fields the bookkeeping needs (type URL,
// nonce, versions, Delta names). The last piece is handed to the client only after that
// bookkeeping, so the client cannot answer a nonce the proxy has not recorded. If Istiod's stream
// fails or its bytes turn out malformed part-way, the client's stream ends with the error: a
// message of which the client already holds a part cannot be completed or taken back.

// pieceBytes is the size of the buffers a forwarded response is read into (an exact class of
// internal/rawpool, so a piece costs no more than its length). Pieces are read up to what they
// hold before anything reads them, so they come from rawpool, which does not clear them as gRPC's
// default pool does (5 % of the binary's CPU on 4 MB pushes, perf/results/profile-binary.md).
const pieceBytes = 32 << 10

// lagBytes is how far the client's writer may lag the upstream reader during a cut-through
// response before the reader waits for it; lagStall is how long the writer may take nothing
// before the client counts as stalled, and lagBudget the most the reader waits in one message
// (see stream).
const (
	lagBytes  = 256 << 10
	lagStall  = 250 * time.Millisecond
	lagBudget = 750 * time.Millisecond
)

// responseReader reads upstream responses. One per upstream stream; owned by upRecvLoop.
type responseReader struct {
	s    *session
	up   upstreamStream
	gen  uint64
	pool mem.BufferPool

	peek   fastpath.Peeker
	scan   fastpath.ResponseScanner
	pd     *pendingDelta // the Delta record the scanner's visits go to
	visit  func(kind fastpath.NameKind, name, version []byte)
	pieces []mem.Buffer // read and not yet handed on

	lagTimer *time.Timer // stopped between waits for a lagging client (stream)
}

func newResponseReader(s *session, up upstreamStream, gen uint64) *responseReader {
	r := &responseReader{s: s, up: up, gen: gen, pool: rawpool.Default, lagTimer: time.NewTimer(lagStall)}
	r.lagTimer.Stop()
	r.visit = func(k fastpath.NameKind, name, version []byte) {
		if k == fastpath.Removed {
			r.pd.removed = append(r.pd.removed, r.pd.add(name))
			return
		}
		r.pd.updated = append(r.pd.updated, r.pd.add(name), r.pd.add(version))
	}
	return r
}

// upRecvLoop reads upstream responses: the agent's own types are consumed and ACKed, the rest
// forwarded to the client, cut-through when they are large.
func (s *session) upRecvLoop(ctx context.Context, up upstreamStream, gen uint64) error {
	r := newResponseReader(s, up, gen)
	defer r.freePieces()
	for {
		size, err := up.RecvMsgHeader()
		if err != nil {
			return err
		}
		if size <= pieceBytes {
			f, err := r.readWhole(size)
			if err != nil {
				return err
			}
			if err := s.onResponse(ctx, &r.peek, f, gen); err != nil {
				return err
			}
			continue
		}
		if err := r.forward(ctx, size); err != nil {
			return err
		}
	}
}

// readPiece reads the next n bytes (n ≤ pieceBytes) of the current message into a pooled buffer.
func (r *responseReader) readPiece(n int) (mem.Buffer, error) {
	bp := r.pool.Get(n)
	if _, err := io.ReadFull(r.up, (*bp)[:n]); err != nil {
		r.pool.Put(bp)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = status.Error(codes.Unavailable, "upstream stream ended in the middle of a message")
		}
		return nil, err
	}
	return mem.NewBuffer(bp, r.pool), nil
}

// readWhole reads the rest of a message of size bytes (after the pieces already read) and
// returns it as one frame.
func (r *responseReader) readWhole(size int) (fastpath.Frame, error) {
	got := 0
	for _, b := range r.pieces {
		got += b.Len()
	}
	for got < size {
		b, err := r.readPiece(min(pieceBytes, size-got))
		if err != nil {
			return fastpath.Frame{}, err
		}
		r.pieces = append(r.pieces, b)
		got += b.Len()
	}
	data := make(mem.BufferSlice, len(r.pieces))
	copy(data, r.pieces)
	clear(r.pieces)
	r.pieces = r.pieces[:0]
	return fastpath.Frame{Data: data}, nil
}

// dropPD gives the current Delta record back unused.
func (r *responseReader) dropPD() {
	r.s.recyclePD(r.pd)
	r.pd = nil
}

func (r *responseReader) freePieces() {
	for _, b := range r.pieces {
		b.Free()
	}
	clear(r.pieces)
	r.pieces = r.pieces[:0]
}

// forward handles a response longer than one piece.
func (r *responseReader) forward(ctx context.Context, size int) error {
	s := r.s
	delta := s.proto.delta()
	var visit func(fastpath.NameKind, []byte, []byte)
	if delta {
		r.pd = s.takePD()
		visit = r.visit
	}
	r.scan.Reset(delta, size, visit)
	got := 0
	typeURL, known := "", false
	for got < size && !known {
		b, err := r.readPiece(min(pieceBytes, size-got))
		if err != nil {
			r.dropPD()
			return err
		}
		r.pieces = append(r.pieces, b)
		got += b.Len()
		if err := r.scan.Feed(b.ReadOnlyData()); err != nil {
			r.dropPD()
			return errUpstreamViolation{err}
		}
		typeURL, known = r.scan.EarlyTypeURL()
	}
	var st *streamItem
	if known && got < size && !s.keeps(typeURL) {
		st = newStreamItem(size)
		if !s.outQ.tryPushIdle(item{typeURL: typeURL, stream: st}) {
			st = nil
		}
	}
	if st == nil { // received whole and handled as a small one
		r.dropPD()
		f, err := r.readWhole(size)
		if err != nil {
			return err
		}
		return s.onResponse(ctx, &r.peek, f, r.gen)
	}
	s.streaming.Store(st)
	err := r.stream(ctx, st, size, got)
	st.finish(err)
	s.streaming.Store(nil)
	_, peak := st.heldBytes()
	s.noteStreamPeak(peak)
	return err
}

// stream hands the pieces read so far to st, then the rest as it arrives. The bookkeeping is done
// before the last piece is handed on. While the writer lags by lagBytes or more the reader waits
// for it: a client slower than Istiod slows Istiod's send on this stream to its own pace, for at
// most lagBudget per message; one that has stopped reading (nothing taken for lagStall) holds it
// up no longer. From then on the rest of the message is held here, so Istiod is never blocked by
// one client.
func (r *responseReader) stream(ctx context.Context, st *streamItem, size, got int) error {
	for _, b := range r.pieces {
		st.append(b)
	}
	clear(r.pieces)
	r.pieces = r.pieces[:0]
	lagging := false
	var waited time.Duration
	var bp *[]byte
	filled := 0
	defer func() {
		if bp != nil {
			r.pool.Put(bp)
		}
	}()
	for got < size {
		if bp == nil {
			if !lagging && st.lags(lagBytes) {
				t0 := time.Now()
				lagging = st.waitBelow(ctx, lagBytes, min(lagStall, lagBudget-waited), r.lagTimer)
				if waited += time.Since(t0); waited >= lagBudget {
					lagging = true
				}
			}
			bp, filled = r.pool.Get(min(pieceBytes, size-got)), 0
		}
		n, err := r.up.Read((*bp)[filled:])
		if n == 0 && err != nil {
			r.dropPD()
			return status.Errorf(codes.Unavailable, "upstream lost during a %d-byte response: %v", size, err)
		}
		if err := r.scan.Feed((*bp)[filled : filled+n]); err != nil {
			r.dropPD()
			return errUpstreamViolation{err}
		}
		filled += n
		got += n
		if got == size {
			if err := r.record(); err != nil {
				return err
			}
		}
		// Pieces go as they arrive (each read is about one HTTP/2 frame); once the writer has
		// fallen behind for good they are filled first, so what is held is all data.
		if filled == len(*bp) || got == size || !lagging {
			*bp = (*bp)[:filled]
			st.append(mem.NewBuffer(bp, r.pool))
			bp = nil
		}
	}
	return nil
}

// record does a forwarded response's bookkeeping once the scanner has seen all of it.
func (r *responseReader) record() error {
	s := r.s
	var typeURL, nonce, version string
	if s.proto.delta() {
		var resp fastpath.DeltaResponse
		if err := r.scan.FinishDelta(&resp); err != nil {
			r.dropPD()
			return errUpstreamViolation{err}
		}
		typeURL, nonce, version = resp.TypeURL, resp.Nonce, resp.Version
		r.pd.nonce = nonce
	} else {
		var resp fastpath.Response
		if err := r.scan.FinishSotW(&resp); err != nil {
			return errUpstreamViolation{err}
		}
		typeURL, nonce, version = resp.TypeURL, resp.Nonce, resp.Version
	}
	if s.keeps(typeURL) {
		r.dropPD()
		return errUpstreamViolation{fmt.Errorf("response of type %s began with a resource of another type", typeURL)}
	}
	s.mu.Lock()
	t := s.typeLocked(typeURL)
	t.lastNonce, t.nonceGen = nonce, r.gen
	s.proto.recordResponseLocked(t, nonce, version, r.pd)
	s.mu.Unlock()
	r.pd = nil
	return nil
}

// keeps reports whether the agent must hold a whole response of this type: its own
// subscriptions, and the rewritten types (Config.Rewriters).
func (s *session) keeps(typeURL string) bool {
	if _, ok := s.rewrites[typeURL]; ok {
		return true
	}
	if _, ok := s.p.cfg.AgentTypes[typeURL]; ok {
		return true
	}
	return false
}

// sendStream writes a response that is still arriving, piece by piece.
func (s *session) sendStream(ctx context.Context, st *streamItem) error {
	defer st.drop()
	if err := s.down.BeginMsg(st.size); err != nil {
		return err
	}
	if s.rec != nil {
		s.rec.Message(st.size) // laststate.go
	}
	for {
		var last bool
		var err error
		s.sendPieces, last, err = st.take(ctx, s.sendPieces[:0])
		if err == nil && len(s.sendPieces) > 0 {
			// Whatever arrived while the last batch was written goes in one write.
			for _, b := range s.sendPieces {
				s.recordPiece(b) // laststate.go
				s.sendBatch = append(s.sendBatch, b.ReadOnlyData())
			}
			err = s.down.WriteBuffers(s.sendBatch)
			clear(s.sendBatch)
			s.sendBatch = s.sendBatch[:0]
		}
		for _, b := range s.sendPieces {
			b.Free()
		}
		clear(s.sendPieces)
		if err != nil || last {
			return err
		}
	}
}
