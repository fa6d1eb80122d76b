package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/mem"

	"github.com/wingman-mesh/wingman/internal/rawpool"
)

// streamItem is a response being forwarded while it still arrives from Istiod (cut-through, see
// cutthrough.go): the upstream receiver appends its pieces, the send loop writes them to the
// client as they come. It holds only the pieces not yet written: with a client that keeps up,
// a few HTTP/2 frames; with one that stalls, at most the rest of this one message, so Istiod is
// never made to wait.
//
// A restored response (laststate.go) is a streamItem with a source instead of a receiver: the
// writer reads its pieces from the source as it writes them.
type streamItem struct {
	size int // immutable: the message's length

	// src, for a restored response, is where the pieces are read from; rd and read are the
	// writer's (take), src is released by drop.
	src  RestoredResponse
	rd   io.Reader
	read int

	mu      sync.Mutex
	pieces  []mem.Buffer // appended, not yet taken by the writer
	held    int          // bytes in pieces
	peak    int          // the most ever held
	done    bool         // every piece has been appended
	err     error        // the receiver gave up: the message cannot be completed
	dropped bool         // the writer is gone: later pieces are freed at once
	ready   chan struct{}
	taken   chan struct{} // signalled when the writer takes pieces or goes
}

func newStreamItem(size int) *streamItem {
	return &streamItem{size: size, ready: make(chan struct{}, 1), taken: make(chan struct{}, 1)}
}

// newRestoredItem is a restored response, read from r as it is written.
func newRestoredItem(r RestoredResponse) *streamItem {
	st := newStreamItem(r.Size())
	st.src = r
	return st
}

// restoredBatch is how many pieces of a restored response one take reads: one write to the
// client, and all of the response the proxy holds at a time.
const restoredBatch = 4

// takeSource reads the next pieces of a restored response (take for an item with a source).
func (st *streamItem) takeSource(dst []mem.Buffer) (_ []mem.Buffer, last bool, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.src == nil {
		return dst, false, errors.New("restored response released")
	}
	if st.rd == nil {
		st.rd = st.src.Open()
	}
	for i := 0; i < restoredBatch && st.read < st.size; i++ {
		bp := rawpool.Default.Get(min(pieceBytes, st.size-st.read))
		if _, err := io.ReadFull(st.rd, *bp); err != nil {
			rawpool.Default.Put(bp)
			return dst, false, fmt.Errorf("restored response: %w", err)
		}
		st.read += len(*bp)
		dst = append(dst, mem.NewBuffer(bp, rawpool.Default))
	}
	return dst, st.read == st.size, nil
}

// lags reports whether the item holds limit bytes or more.
func (st *streamItem) lags(limit int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.held >= limit && !st.dropped
}

// waitBelow waits until the item holds less than limit bytes or the writer goes. It gives up,
// reporting stalled, when the writer takes nothing for stall: a client that has stopped reading,
// not one that is merely slower than Istiod. t is the caller's timer, stopped on return.
func (st *streamItem) waitBelow(ctx context.Context, limit int, stall time.Duration, t *time.Timer) (stalled bool) {
	armed := false
	defer func() {
		if armed {
			t.Stop()
		}
	}()
	for {
		st.mu.Lock()
		ok := st.held < limit || st.dropped
		st.mu.Unlock()
		if ok {
			return false
		}
		t.Reset(stall) // from now, or from the writer's latest progress
		armed = true
		select {
		case <-st.taken:
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// append hands the writer the next piece (one reference, now owned by the item).
func (st *streamItem) append(b mem.Buffer) {
	st.mu.Lock()
	if st.dropped {
		st.mu.Unlock()
		b.Free()
		return
	}
	st.pieces = append(st.pieces, b)
	st.held += b.Len()
	st.peak = max(st.peak, st.held)
	st.mu.Unlock()
	signal(st.ready)
}

// finish marks the message complete (every piece appended) or, with err, abandoned.
func (st *streamItem) finish(err error) {
	st.mu.Lock()
	st.done, st.err = true, err
	st.mu.Unlock()
	signal(st.ready)
}

// take waits for pieces and moves them into dst (the caller then owns and frees them). last
// reports that the message is complete and dst holds its final pieces.
func (st *streamItem) take(ctx context.Context, dst []mem.Buffer) (_ []mem.Buffer, last bool, err error) {
	if st.src != nil {
		return st.takeSource(dst)
	}
	for {
		st.mu.Lock()
		if st.err != nil {
			err := st.err
			st.mu.Unlock()
			return dst, false, err
		}
		if len(st.pieces) > 0 || st.done {
			dst = append(dst, st.pieces...)
			clear(st.pieces)
			st.pieces = st.pieces[:0]
			st.held = 0
			last = st.done
			st.mu.Unlock()
			signal(st.taken)
			return dst, last, nil
		}
		st.mu.Unlock()
		select {
		case <-st.ready:
		case <-ctx.Done():
			return dst, false, context.Cause(ctx)
		}
	}
}

// drop frees what the item holds and makes later appends free their pieces: the writer is gone.
func (st *streamItem) drop() {
	st.mu.Lock()
	st.dropped = true
	for _, b := range st.pieces {
		b.Free()
	}
	clear(st.pieces)
	st.pieces, st.held = nil, 0
	if st.src != nil {
		st.src.Release()
		st.src, st.rd = nil, nil
	}
	st.mu.Unlock()
	signal(st.taken)
}

// heldBytes is what the item holds now and the most it ever held.
func (st *streamItem) heldBytes() (now, peak int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.held, st.peak
}
