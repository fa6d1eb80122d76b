package mux

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/fastpath"
)

func frameOf(n int, tag string) fastpath.Frame {
	b := make([]byte, n)
	copy(b, tag)
	return fastpath.FrameOf(b)
}

// TestQueueCoalescingKeepsOrder pushes random SotW (coalescing) and Delta messages and checks
// the queue's promises: what comes out is a subsequence of what went in, in the same order; the
// newest message of each coalescing type is never dropped; at most one message per coalescing
// type is pending; non-coalescing messages are never dropped.
func TestQueueCoalescingKeepsOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	types := []string{fastpath.ClusterType, fastpath.ListenerType, fastpath.RouteType, fastpath.EndpointType}
	for seed := range 50 {
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		q := newQueue(1 << 30)
		var in []string
		lastOf := map[string]string{}
		for i := range 200 {
			typ := types[r.IntN(len(types))]
			co := r.IntN(3) > 0
			tag := fmt.Sprintf("%s#%d#%v", typ, i, co)
			in = append(in, tag)
			if co {
				lastOf[typ] = tag
			}
			if _, err := q.tryPush(item{typeURL: typ, frame: fastpath.FrameOf([]byte(tag)), coalesce: co}); err != nil {
				t.Fatal(err)
			}
			pending := map[string]int{}
			q.mu.Lock()
			for _, it := range q.items {
				if it.coalesce {
					pending[it.typeURL]++
				}
			}
			q.mu.Unlock()
			for typ, n := range pending {
				if n > 1 {
					t.Fatalf("seed %d: %d coalescing %s pending", seed, n, typ)
				}
			}
		}
		var out []string
		for {
			q.mu.Lock()
			n := len(q.items)
			q.mu.Unlock()
			if n == 0 {
				break
			}
			it, err := q.pop(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(it.frame.Data.Materialize()))
			it.frame.Free()
		}
		// Subsequence, in order.
		j := 0
		for _, tag := range in {
			if j < len(out) && out[j] == tag {
				j++
			}
		}
		if j != len(out) {
			t.Fatalf("seed %d: output is not an in-order subsequence of the input", seed)
		}
		for _, tag := range in {
			if tag[len(tag)-5:] == "false" && !slices.Contains(out, tag) {
				t.Fatalf("seed %d: non-coalescing %s dropped", seed, tag)
			}
		}
		for typ, last := range lastOf {
			if !slices.Contains(out, last) {
				t.Fatalf("seed %d: newest %s message %s dropped", seed, typ, last)
			}
		}
	}
}

// TestQueueBoundsNonCoalescing: a non-coalescing push waits once the queue holds its limit,
// and resumes when the consumer takes an item; one oversized item is always admitted.
func TestQueueBoundsNonCoalescing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	q := newQueue(100)
	if ok, _ := q.tryPush(item{frame: frameOf(500, "big")}); !ok {
		t.Fatal("an empty queue must admit one oversized item")
	}
	if ok, _ := q.tryPush(item{frame: frameOf(10, "x")}); ok {
		t.Fatal("push over the limit was admitted")
	}
	if ok, _ := q.tryPush(item{typeURL: "t", frame: frameOf(10, "s"), coalesce: true}); !ok {
		t.Fatal("a coalescing push must never wait")
	}
	// A push with no room waits: one whose context has already ended gives up and admits
	// nothing (had it not waited, it would have been admitted).
	ended, cancelEnded := context.WithCancel(ctx)
	cancelEnded()
	if err := q.push(ended, item{frame: frameOf(10, "given up")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("push over the limit with its context ended: %v, want it to wait and give up", err)
	}
	if bytes, _, _ := q.stats(); bytes != 510 {
		t.Fatalf("%d bytes queued after a push that gave up, want 510", bytes)
	}
	done := make(chan error, 1)
	go func() { done <- q.push(ctx, item{frame: frameOf(10, "waiting")}) }()
	it, err := q.pop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	it.frame.Free()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if bytes, peak, _ := q.stats(); bytes != 20 || peak != 510 {
		t.Fatalf("bytes %d peak %d, want 20 and 510", bytes, peak)
	}
	q.close()
	if _, err := q.pop(ctx); err != errQueueClosed {
		t.Fatalf("pop after close: %v", err)
	}
	if _, err := q.tryPush(item{frame: frameOf(1, "late")}); err != errQueueClosed {
		t.Fatalf("push after close: %v", err)
	}
}

// TestQueueMergesPerType: merging items never wait, at most one per type is pending, in the
// place of the first, and a pair the merger refuses waits for room like any other item.
func TestQueueMergesPerType(t *testing.T) {
	q := newQueue(10)
	q.merge = func(older, newer fastpath.Frame) (fastpath.Frame, error) {
		a, b := string(older.Data.Materialize()), string(newer.Data.Materialize())
		if b == "refuse" {
			return fastpath.Frame{}, fmt.Errorf("refused")
		}
		return fastpath.FrameOf([]byte(a + "+" + b)), nil
	}
	push := func(typ, tag string) bool {
		ok, err := q.tryPush(item{typeURL: typ, frame: fastpath.FrameOf([]byte(tag)), merge: true})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, p := range [][2]string{{"C", "c1"}, {"E", "e1"}, {"C", "c2"}, {"C", "c3"}, {"E", "e2"}} {
		if !push(p[0], p[1]) {
			t.Fatalf("merging push %v waited", p)
		}
	}
	if push("C", "refuse") { // over the 10-byte bound and not mergeable: must wait
		t.Fatal("a refused merge was admitted over the bound")
	}
	var got []string
	for range 2 {
		it, err := q.pop(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(it.frame.Data.Materialize()))
		it.frame.Free()
	}
	if want := []string{"c1+c2+c3", "e1+e2"}; !slices.Equal(got, want) {
		t.Fatalf("popped %q, want %q", got, want)
	}
	if _, _, n := q.stats(); n != 3 {
		t.Fatalf("%d merged, want 3", n)
	}
	q.close()
}
