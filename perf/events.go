package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Event is one line of the Envoy stand-in's report (see lab/envoystub).
type Event struct {
	ID      string `json:"id"`
	Ev      string `json:"ev"` // start, push, nack, sds, ads_error, sds_error, exit
	API     string `json:"api,omitempty"`
	Type    string `json:"type,omitempty"`
	Version string `json:"version,omitempty"`
	Name    string `json:"name,omitempty"`
	Bytes   int    `json:"bytes,omitempty"`
	N       int    `json:"n,omitempty"`
	Err     string `json:"err,omitempty"`
	T       int64  `json:"t"`
	T0      int64  `json:"t0,omitempty"` // on "start": when the stand-in's main package was initialised
	// On "start": on-CPU nanoseconds of the agent and of the stand-in itself at T0 (-1: unread).
	AgentCPU int64 `json:"agent_cpu,omitempty"`
	CPU      int64 `json:"cpu,omitempty"`
}

// Time is the event's wall-clock time.
func (e Event) Time() time.Time { return time.Unix(0, e.T) }

// Hub collects the events of every stand-in over one Unix socket.
type Hub struct {
	l    net.Listener
	wg   sync.WaitGroup // the accept loop and one reader per connection
	mu   sync.Mutex     // guards the fields below
	evs  []Event
	wake chan struct{} // closed and replaced on every new event
	conn map[net.Conn]struct{}
}

// NewHub listens on path.
func NewHub(path string) (*Hub, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("event hub: listen on %s: %w", path, err)
	}
	h := &Hub{l: l, wake: make(chan struct{}), conn: map[net.Conn]struct{}{}}
	h.wg.Go(h.accept)
	return h, nil
}

// Spec is the PERF_EVENTS value that makes a stand-in report here.
func (h *Hub) Spec() string { return "unix:" + h.l.Addr().String() }

func (h *Hub) accept() {
	for {
		c, err := h.l.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.conn[c] = struct{}{}
		h.mu.Unlock()
		h.wg.Go(func() { h.read(c) })
	}
}

func (h *Hub) read(c net.Conn) {
	defer func() {
		c.Close()
		h.mu.Lock()
		delete(h.conn, c)
		h.mu.Unlock()
	}()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			e = Event{Ev: "bad_event", Err: fmt.Sprintf("%v: %q", err, sc.Bytes()), T: time.Now().UnixNano()}
		}
		h.mu.Lock()
		h.evs = append(h.evs, e)
		close(h.wake)
		h.wake = make(chan struct{})
		h.mu.Unlock()
	}
}

// Close stops listening, closes every connection and waits for the readers.
func (h *Hub) Close() {
	h.l.Close()
	h.mu.Lock()
	for c := range h.conn {
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// Mark is a position in the event log; Wait and Since look only at events after it.
func (h *Hub) Mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.evs)
}

// Since returns a copy of the events after mark.
func (h *Hub) Since(mark int) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.evs[min(mark, len(h.evs)):]...)
}

// ErrNoEvent is wrapped by Wait when ctx ends first.
var ErrNoEvent = errors.New("no matching event from the Envoy stand-in")

// Wait returns the first event after mark that match accepts.
func (h *Hub) Wait(ctx context.Context, mark int, what string, match func(Event) bool) (Event, error) {
	for {
		h.mu.Lock()
		for ; mark < len(h.evs); mark++ {
			if match(h.evs[mark]) {
				e := h.evs[mark]
				h.mu.Unlock()
				return e, nil
			}
		}
		wake := h.wake
		h.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return Event{}, fmt.Errorf("waiting for %s: %w (%w)", what, ErrNoEvent, context.Cause(ctx))
		}
	}
}

// WaitAll waits until, for every id in ids, an event after mark matches.
func (h *Hub) WaitAll(ctx context.Context, mark int, ids []string, what string, match func(Event) bool) (map[string]Event, error) {
	got := map[string]Event{}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(got) < len(want) {
		e, err := h.Wait(ctx, mark, what, func(e Event) bool { return want[e.ID] && match(e) && !has(got, e.ID) })
		if err != nil {
			return got, fmt.Errorf("%w (%d of %d stand-ins answered)", err, len(got), len(want))
		}
		got[e.ID] = e
		// Events are ordered: continue scanning from the start of the log after mark; has()
		// skips ids already seen.
	}
	return got, nil
}

func has(m map[string]Event, k string) bool { _, ok := m[k]; return ok }
