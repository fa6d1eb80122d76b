package mux

import (
	"context"
	"errors"
	"sync"

	"github.com/wingman-mesh/wingman/fastpath"
)

// errQueueClosed is returned by a closed queue.
var errQueueClosed = errors.New("mux: stream closed")

// item is one message waiting in a queue. Its frame is owned by the queue until popped.
type item struct {
	typeURL  string
	frame    fastpath.Frame
	coalesce bool // a state-of-the-world message: a newer one of the same type replaces it
	merge    bool // a Delta response: a newer one of the same type is merged into it
	// stream, when set, is a response forwarded while it arrives (cut-through); frame is
	// empty. It neither coalesces nor is merged into: part of it may already be at the client.
	// A restored response (laststate.go) is a stream item too; while it waits in the queue,
	// nothing of it is at the client, so a state-of-the-world one coalesces.
	stream *streamItem
}

// free releases what the item holds.
func (it *item) free() {
	it.frame.Free()
	if it.stream != nil {
		it.stream.drop()
	}
}

// merger merges two pending messages into one with the effect of both in turn; it does not
// consume its arguments. An error leaves the newer message to wait its turn unmerged.
type merger func(older, newer fastpath.Frame) (fastpath.Frame, error)

// queue is a FIFO of messages bounded in bytes. Coalescing items never wait: a pending one of
// the same type is dropped (its bytes freed) and the new one appended at the tail, so what is
// delivered is always a subsequence of what was pushed, in order, and there is at most one
// coalescing item per type. Other items wait for room once the queue holds limit bytes (one item
// is always admitted, whatever its size). Merging items (with a merger set) never wait either:
// one is merged into the pending one of its type, in that one's place, or is the first of its
// type, so at most one per type is pending.
type queue struct {
	limit int    // immutable after newQueue
	merge merger // immutable after newQueue; nil: no merging

	mu         sync.Mutex // guards the fields below
	items      []item
	bytes      int
	peak       int
	superseded int // pending messages a newer one of their type replaced (coalesced) or merged into
	closed     bool
	waiting    int // pop calls waiting for an item

	ready chan struct{} // capacity 1: signalled when an item is added or the queue closes
	room  chan struct{} // capacity 1: signalled when bytes are released or the queue closes
}

func newQueue(limit int) *queue {
	return &queue{limit: limit, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// tryPush adds it unless it must wait for room. On error the item's frame has been freed.
func (q *queue) tryPush(it item) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		it.free()
		return false, errQueueClosed
	}
	size := it.frame.Len()
	if it.coalesce {
		for i := range q.items {
			if q.items[i].coalesce && q.items[i].typeURL == it.typeURL {
				q.bytes -= q.items[i].frame.Len()
				q.items[i].free() // a frame, or a restored response not yet sent (laststate.go)
				q.items = append(q.items[:i], q.items[i+1:]...)
				q.superseded++
				break
			}
		}
	} else if it.merge && q.merge != nil {
		if done, mergeable := q.mergeLocked(it); done {
			return true, nil
		} else if !mergeable && len(q.items) > 0 && q.bytes+size > q.limit {
			return false, nil
		}
	} else if len(q.items) > 0 && q.bytes+size > q.limit {
		return false, nil
	}
	q.items = append(q.items, it)
	q.bytes += size
	q.peak = max(q.peak, q.bytes)
	signal(q.ready)
	return true, nil
}

// tryPushIdle adds it only when the queue is empty and a pop is waiting for it, so that it goes
// out at once: the condition for forwarding a response while it still arrives (cut-through).
func (q *queue) tryPushIdle(it item) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.items) > 0 || q.waiting == 0 {
		return false
	}
	q.items = append(q.items, it)
	signal(q.ready)
	return true
}

// mergeLocked merges it into the pending merging item of its type, if any (done: it was consumed).
// mergeable is false when the merger refused the pair, so it must wait like any other item.
func (q *queue) mergeLocked(it item) (done, mergeable bool) {
	for i := range q.items {
		old := &q.items[i]
		if !old.merge || old.typeURL != it.typeURL {
			continue
		}
		m, err := q.merge(old.frame, it.frame)
		if err != nil {
			return false, false
		}
		q.bytes += m.Len() - old.frame.Len()
		q.peak = max(q.peak, q.bytes+old.frame.Len()+it.frame.Len()) // all three were held while merging
		old.frame.Free()
		it.frame.Free()
		old.frame = m
		q.superseded++
		return true, true
	}
	return false, true
}

// push adds it, waiting for room if it must. On error the item's frame has been freed.
func (q *queue) push(ctx context.Context, it item) error {
	for {
		ok, err := q.tryPush(it)
		if err != nil || ok {
			return err
		}
		select {
		case <-q.room:
		case <-ctx.Done():
			it.free()
			return context.Cause(ctx)
		}
	}
}

// pop removes the head item, waiting for one. The caller owns the returned frame.
func (q *queue) pop(ctx context.Context) (item, error) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return item{}, errQueueClosed
		}
		if len(q.items) > 0 {
			it := q.items[0]
			q.items[0] = item{}
			q.items = q.items[1:]
			if len(q.items) == 0 {
				q.items = q.items[:0:0] // let the backing array go; it regrows small
			}
			q.bytes -= it.frame.Len()
			q.mu.Unlock()
			signal(q.room)
			return it, nil
		}
		q.waiting++
		q.mu.Unlock()
		var err error
		select {
		case <-q.ready:
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		q.mu.Lock()
		q.waiting--
		q.mu.Unlock()
		if err != nil {
			return item{}, err
		}
	}
}

// drain frees every pending item.
func (q *queue) drain() {
	q.mu.Lock()
	for i := range q.items {
		q.items[i].free()
	}
	q.items, q.bytes = nil, 0
	q.mu.Unlock()
	signal(q.room)
}

// close drains the queue; later pushes fail and free their frames.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.drain()
	signal(q.ready)
}

// stats returns the bytes pending now, the most ever pending and the messages superseded.
func (q *queue) stats() (bytes, peak, superseded int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes, q.peak, q.superseded
}
