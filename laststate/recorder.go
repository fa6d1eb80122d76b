package laststate

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/mem"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/atomicfile"
	"github.com/wingman-mesh/wingman/internal/clock"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/mux"
)

// FileName is the snapshot's name in the proxy working directory; spools live in SpoolDir.
const (
	FileName = "wingman-last-state.snap"
	SpoolDir = ".wingman-last-state"
)

// queueBudget bounds the bytes handed to the recorder and not yet spooled. Beyond it a response
// is not recorded (its pieces are freed at once): the recorder never holds up forwarding nor
// holds a growing backlog. One response is always taken when nothing waits.
const queueBudget = 8 << 20

// writeInterval is the least time between two snapshot writes: the snapshot is at most this
// much behind what the clients accepted, and a burst of pushes costs one write.
const writeInterval = 200 * time.Millisecond

// maxPending is how many responses of a type sent to one client and not yet answered are kept.
const maxPending = 16

// maxDeltaLog is how many ACKed Delta responses of a type are kept before they are merged into
// one (each snapshot write merges them too, merge.go).
const maxDeltaLog = 16

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	Dir      string   // the proxy working directory (./etc/istio/proxy): must be a tmpfs
	Identity Identity // this pod's: written into every snapshot
	// Certs returns the current workload certificate material; false before the first.
	Certs    func() (Certs, bool)
	MaxBytes int64 // snapshot bound (default DefaultMaxBytes)
	Clock    clock.Clock
	Logger   *slog.Logger
	Registry *metric.Registry // nil: counted, not exported
}

// Recorder implements mux.Recorder: it spools what clients are sent, keeps what they ACK and
// rewrites the snapshot from it. Create with NewRecorder, run with Run.
type Recorder struct {
	cfg   RecorderConfig // immutable
	path  string         // immutable: the snapshot file
	spool string         // immutable: the spool directory
	log   *slog.Logger
	met   recorderMetrics

	mu      sync.Mutex // guards the queue and the fields below
	q       []event
	qBytes  int
	closed  bool
	writes  uint64
	written chan struct{} // closed and replaced on every write or skip
	wake    chan struct{} // capacity 1
	ntNext  []byte        // the name table accepted last and not yet spooled (only the newest waits)
	ntSet   bool          // ntNext is set (an empty table is a table)

	// Owned by the Run goroutine.
	keys    map[streamKey]*keyState
	seq     int
	dirty   bool
	flushes []chan struct{} // closed by the next write or skip (tests)
	tooBig  bool            // the last snapshot was over the bound (warned once until it fits again)
	merge   mergeScratch    // merge.go's buffers
	nt      *spooled        // the DNS proxy's name table last accepted; nil: none yet
}

type recorderMetrics struct {
	writes, skipped, dropped *metric.Counter
	bytes                    *metric.Gauge
}

type streamKey struct {
	delta  bool
	nodeID string
}

// keyState is what clients of one stream key last accepted, per type.
type keyState struct {
	types map[string]*typeLog
}

// typeLog is a type's accepted responses: one for state of the world, the applied sequence for
// Delta. owner is the stream that accepted them (nil: seeded from an earlier snapshot); a new
// stream's first ACK of the type replaces them.
type typeLog struct {
	owner   *streamRec
	entries []spooled
	broken  bool // a Delta response of the owner was not recorded: the log is incomplete
}

// spooled is one response on disk.
type spooled struct {
	file             string
	size             int64
	typeURL, version string
	nonce            string
}

type eventKind uint8

const (
	evMessage eventKind = iota
	evPiece
	evAnswer
	evClose
	evLost
	evCerts
	evFlush
)

type event struct {
	sr       *streamRec
	kind     eventKind
	size     int
	buf      mem.Buffer
	typeURL  string
	nonce    string
	accepted bool
	flushed  chan struct{} // evFlush: closed by the next write or skip
}

// NewRecorder checks the directory (a tmpfs, named otherwise) and clears spools an earlier run
// left behind.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("last-state directory: %w", err)
	}
	if err := CheckTmpfs(cfg.Dir); err != nil {
		return nil, err
	}
	r := &Recorder{cfg: cfg, path: filepath.Join(cfg.Dir, FileName), spool: filepath.Join(cfg.Dir, SpoolDir),
		log: cfg.Logger, written: make(chan struct{}), wake: make(chan struct{}, 1), keys: map[streamKey]*keyState{}}
	reg := cfg.Registry
	r.met = recorderMetrics{
		writes:  reg.Counter("wingman_last_state_writes_total", "Snapshots of the last accepted xDS state and certificate written."),
		skipped: reg.Counter("wingman_last_state_skipped_total", "Snapshots not written: over the size bound, no certificate yet, or a write error."),
		dropped: reg.Counter("wingman_last_state_dropped_responses_total", "Responses sent to a client that the recorder could not keep up with and did not record."),
		bytes:   reg.Gauge("wingman_last_state_bytes", "Size of the last snapshot written."),
	}
	// A write cut short by a kill leaves its temporary file: it would only take the pod's memory.
	if ents, err := os.ReadDir(cfg.Dir); err == nil {
		for _, e := range ents {
			if atomicfile.IsTemp(e.Name()) && strings.HasPrefix(e.Name(), "."+FileName+".tmp-") {
				_ = os.Remove(filepath.Join(cfg.Dir, e.Name()))
			}
		}
	}
	if err := os.RemoveAll(r.spool); err != nil {
		return nil, fmt.Errorf("last-state spool: %w", err)
	}
	if err := os.Mkdir(r.spool, 0o700); err != nil {
		return nil, fmt.Errorf("last-state spool: %w", err)
	}
	return r, nil
}

// Path is the snapshot file.
func (r *Recorder) Path() string { return r.path }

// Seed starts the state from an earlier snapshot of this pod, so that a client's first ACKs after
// a restart do not shrink the snapshot to the types ACKed so far: each type is replaced when a
// client first accepts a response of it. Call before Run.
func (r *Recorder) Seed(s *Snapshot) error {
	if err := r.seedNameTable(s); err != nil {
		return err
	}
	for _, st := range s.Streams {
		k := r.key(streamKey{st.Delta, st.NodeID})
		for _, resp := range st.Responses {
			file, err := r.spoolFrom(s.Open(resp))
			if err != nil {
				return err
			}
			tl := k.types[resp.TypeURL]
			if tl == nil {
				tl = &typeLog{}
				k.types[resp.TypeURL] = tl
			}
			tl.entries = append(tl.entries, spooled{file: file, size: resp.Size(), typeURL: resp.TypeURL, version: resp.Version})
		}
	}
	return nil
}

// seedNameTable spools the earlier snapshot's name table, kept until the DNS proxy accepts one.
func (r *Recorder) seedNameTable(s *Snapshot) error {
	if s.NameTable == nil {
		return nil
	}
	file, err := r.spoolFrom(s.Open(*s.NameTable))
	if err != nil {
		return err
	}
	r.nt = &spooled{file: file, size: s.NameTable.Size(), typeURL: fastpath.NameTableType}
	return nil
}

func (r *Recorder) key(k streamKey) *keyState {
	ks := r.keys[k]
	if ks == nil {
		ks = &keyState{types: map[string]*typeLog{}}
		r.keys[k] = ks
	}
	return ks
}

// Stream implements mux.Recorder.
func (r *Recorder) Stream(delta bool, nodeID string) mux.StreamRecorder {
	return &streamRec{r: r, key: streamKey{delta, nodeID}}
}

// NameTable records the DNS proxy's name table the agent just accepted: raw is the NameTable
// resource's bytes as the agent's NDS handler got them, kept as they are (not copied: the caller
// must not change them) until the Run goroutine spools them, off the stream's goroutine. Only the
// newest table waits: one accepted before it was spooled is superseded, never queued, so the
// recorder holds at most one table besides the spools.
func (r *Recorder) NameTable(raw []byte) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.ntNext, r.ntSet = raw, true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// takeNameTable spools the name table waiting, if any, in place of the last one.
func (r *Recorder) takeNameTable() {
	r.mu.Lock()
	raw, set := r.ntNext, r.ntSet
	r.ntNext, r.ntSet = nil, false
	r.mu.Unlock()
	if !set {
		return
	}
	file, err := r.spoolBytes(raw)
	if err != nil {
		// The older table on disk is not what the DNS proxy serves now: left out, not kept stale.
		r.log.Warn("last state: the DNS name table is not recorded; it is left out of the snapshot", "err", err)
		file = ""
	}
	if r.nt != nil {
		removeAll([]spooled{*r.nt})
		r.nt = nil
	}
	if file != "" {
		r.nt = &spooled{file: file, size: int64(len(raw)), typeURL: fastpath.NameTableType}
	}
	r.dirty = true
}

// CertsChanged asks for the snapshot to be rewritten with the current certificate.
func (r *Recorder) CertsChanged() { r.push(event{kind: evCerts}) }

// flush returns a channel closed once a snapshot write (or skip) has taken in every event
// handed to the recorder before the call (tests).
func (r *Recorder) flush() <-chan struct{} {
	ch := make(chan struct{})
	r.push(event{kind: evFlush, flushed: ch})
	return ch
}

// Written returns how many snapshots were written or skipped so far and a channel closed at the
// next one (tests wait on it).
func (r *Recorder) Written() (uint64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes, r.written
}

func (r *Recorder) push(e event) bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		if e.buf != nil {
			e.buf.Free()
		}
		return false
	}
	if e.buf != nil {
		r.qBytes += e.buf.Len()
	}
	r.q = append(r.q, e)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

// streamRec is one client stream's recorder. Its methods run on the stream's goroutines; what
// they hear goes, in order, to the Run goroutine. dropping is guarded by the Recorder's mu.
type streamRec struct {
	r        *Recorder
	key      streamKey
	dropping bool // the current message is over the budget: its pieces are freed

	// Owned by the Run goroutine.
	cur     *message
	pending map[string][]spooled
	broken  bool // a Delta response was not recorded: nothing more of this stream is kept
}

func (s *streamRec) Message(size int) {
	s.r.mu.Lock()
	s.dropping = false
	s.r.mu.Unlock()
	s.r.push(event{sr: s, kind: evMessage, size: size})
}

func (s *streamRec) Piece(b mem.Buffer) {
	r := s.r
	r.mu.Lock()
	lost := !s.dropping && r.qBytes > 0 && r.qBytes+b.Len() > queueBudget
	if lost {
		s.dropping = true // the rest of this response is freed at once
	}
	drop := s.dropping
	r.mu.Unlock()
	if lost {
		r.met.dropped.Inc()
		r.push(event{sr: s, kind: evLost})
	}
	if drop {
		b.Free()
		return
	}
	r.push(event{sr: s, kind: evPiece, buf: b})
}

func (s *streamRec) Answered(typeURL, nonce string, accepted bool) {
	s.r.push(event{sr: s, kind: evAnswer, typeURL: typeURL, nonce: nonce, accepted: accepted})
}

func (s *streamRec) Close() { s.r.push(event{sr: s, kind: evClose}) }

// Run spools and records until ctx is done, writing the snapshot whenever what clients accepted
// changed and no event waits. It removes the spools when it returns; the snapshot stays.
func (r *Recorder) Run(ctx context.Context) error {
	defer func() {
		r.mu.Lock()
		r.closed = true
		q := r.q
		r.q = nil
		r.ntNext, r.ntSet = nil, false
		r.mu.Unlock()
		for _, e := range q {
			if e.buf != nil {
				e.buf.Free()
			}
		}
		_ = os.RemoveAll(r.spool)
	}()
	var batch []event
	var last time.Time // of the last write
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		r.mu.Lock()
		batch, r.q = r.q, batch[:0]
		r.mu.Unlock()
		for i := range batch {
			r.handle(&batch[i])
			batch[i] = event{}
		}
		if len(batch) > 0 {
			continue // drain before writing
		}
		r.takeNameTable()
		var due <-chan time.Time
		if r.dirty {
			// At most one write per writeInterval: a burst of pushes and ACKs costs one.
			wait := writeInterval - r.cfg.Clock.Now().Sub(last)
			if wait <= 0 || len(r.flushes) > 0 {
				r.dirty = false
				r.write()
				last = r.cfg.Clock.Now()
				continue
			}
			if timer == nil {
				timer = r.cfg.Clock.NewTimer(wait)
			}
			due = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-due:
			timer = nil
		}
	}
}

func (r *Recorder) handle(e *event) {
	if e.buf != nil {
		r.mu.Lock()
		r.qBytes -= e.buf.Len()
		r.mu.Unlock()
	}
	switch e.kind {
	case evCerts:
		r.dirty = true
	case evFlush:
		r.dirty = true
		r.flushes = append(r.flushes, e.flushed)
	case evMessage:
		e.sr.abort()
		m, err := r.newMessage(e.sr.key.delta, e.size)
		if err != nil {
			r.log.Warn("last state: cannot spool a response", "err", err)
			e.sr.lost()
			return
		}
		e.sr.cur = m
	case evPiece:
		defer e.buf.Free()
		m := e.sr.cur
		if m == nil {
			return
		}
		done, err := m.feed(e.buf.ReadOnlyData())
		if err != nil {
			r.log.Warn("last state: response not recorded", "err", err)
			e.sr.abort()
			e.sr.lost()
			return
		}
		if done {
			e.sr.cur = nil
			if e.sr.pending == nil {
				e.sr.pending = map[string][]spooled{}
			}
			l := append(e.sr.pending[m.sp.typeURL], m.sp)
			if len(l) > maxPending {
				// Unanswered for long: the oldest is forgotten. A Delta client's later ACK
				// would cover it too, so its stream can no longer be kept whole.
				removeAll(l[:1])
				l = slices.Delete(l, 0, 1)
				e.sr.lost()
			}
			e.sr.pending[m.sp.typeURL] = l
		}
	case evLost:
		e.sr.abort()
		e.sr.lost()
	case evAnswer:
		r.answer(e.sr, e.typeURL, e.nonce, e.accepted)
	case evClose:
		e.sr.abort()
		for _, l := range e.sr.pending {
			removeAll(l)
		}
		e.sr.pending = nil
	}
}

// abort drops the message being spooled.
func (s *streamRec) abort() {
	if s.cur != nil {
		s.cur.discard()
		s.cur = nil
	}
}

// lost marks a Delta stream incomplete: a response it was sent is not on disk, so its types'
// logs would miss resources; its key is left out of snapshots from now on.
func (s *streamRec) lost() {
	if !s.key.delta || s.broken {
		return
	}
	s.broken = true
	s.r.log.Warn("last state: a Delta response could not be recorded; this stream's state is left out of the snapshot", "node", s.key.nodeID)
	if ks := s.r.keys[s.key]; ks != nil {
		// Every type of the stream's key: what an earlier stream (or run) left is older than what
		// this client holds now. A later stream's first ACK of a type makes it whole again.
		for _, tl := range ks.types {
			tl.broken = true
		}
		s.r.dirty = true
	}
}

// answer applies a client's ACK or NACK of a nonce to the responses pending for its type.
func (r *Recorder) answer(s *streamRec, typeURL, nonce string, accepted bool) {
	list := s.pending[typeURL]
	idx := slices.IndexFunc(list, func(sp spooled) bool { return sp.nonce == nonce })
	if idx < 0 {
		return
	}
	upto := slices.Clone(list[:idx+1]) // Delete below clears the tail of list
	s.pending[typeURL] = slices.Delete(list, 0, idx+1)
	if !accepted || s.broken {
		removeAll(upto)
		return
	}
	ks := r.key(s.key)
	tl := ks.types[typeURL]
	if tl == nil {
		tl = &typeLog{}
		ks.types[typeURL] = tl
	}
	if tl.owner != s { // a new stream's first accepted response of the type replaces the old
		removeAll(tl.entries)
		tl.entries, tl.owner, tl.broken = nil, s, false
	}
	if !s.key.delta {
		// State of the world: the accepted response is the whole state; earlier ones the client
		// answered already, or never saw alone.
		removeAll(upto[:idx])
		removeAll(tl.entries)
		tl.entries = append(tl.entries[:0], upto[idx])
	} else {
		// Delta: every response up to the accepted one was applied, in order (mux merges or
		// folds those the client did not answer one by one).
		tl.entries = append(tl.entries, upto...)
		if len(tl.entries) > maxDeltaLog {
			if err := r.compact(tl); err != nil {
				r.log.Warn("last state: merging Delta responses failed; the type is left out of the snapshot", "type", typeURL, "err", err)
				tl.broken = true
			}
		}
	}
	r.dirty = true
}

func removeAll(l []spooled) {
	for _, sp := range l {
		_ = os.Remove(sp.file)
	}
}

// write rewrites the snapshot from the accepted state, streamed from the spools through the
// checksum into a temporary file renamed over the old one (0600).
func (r *Recorder) write() {
	defer r.notify()
	certs, ok := r.cfg.Certs()
	if !ok {
		r.met.skipped.Inc()
		return // no certificate yet: a snapshot without one could not be restored
	}
	keys := slices.SortedFunc(maps.Keys(r.keys), func(a, b streamKey) int {
		if a.delta != b.delta {
			if a.delta {
				return 1
			}
			return -1
		}
		return cmpString(a.nodeID, b.nodeID)
	})
	// A Delta type is stored as one response, its log merged (streamed, merge.go): a restore
	// sends it as it is, and the client never passes through an older state.
	for _, k := range keys {
		if !k.delta {
			continue
		}
		for typeURL, tl := range r.keys[k].types {
			if tl.broken || len(tl.entries) < 2 {
				continue
			}
			if err := r.compact(tl); err != nil {
				r.log.Warn("last state: merging Delta responses failed; the type is left out of the snapshot", "type", typeURL, "err", err)
				tl.broken = true
			}
		}
	}
	est := int64(1 << 10)
	est += int64(len(certs.Chain) + len(certs.Key) + len(certs.Roots))
	if r.nt != nil {
		est += r.nt.size + 16
	}
	for _, k := range keys {
		for _, tl := range r.keys[k].types {
			if tl.broken {
				continue
			}
			for _, sp := range tl.entries {
				est += sp.size + int64(len(sp.typeURL)+len(sp.version)) + 32
			}
		}
	}
	if est > r.cfg.MaxBytes {
		r.met.skipped.Inc()
		if !r.tooBig {
			r.log.Warn("last state: snapshot over its bound, not written; the previous one is removed", "bytes", est, "bound", r.cfg.MaxBytes)
		}
		r.tooBig = true
		_ = os.Remove(r.path)
		return
	}
	r.tooBig = false
	var size int64
	err := atomicfile.WriteFunc(r.path, 0o600, atomicfile.Options{}, func(w io.Writer) error {
		e := newEncoder(w)
		e.meta(r.cfg.Identity, r.cfg.Clock.Now())
		e.certs(certs)
		if r.nt != nil {
			if err := copyNameTable(e, *r.nt); err != nil {
				return err
			}
		}
		for _, k := range keys {
			types := r.keys[k].types
			names := slices.Sorted(maps.Keys(types))
			opened := false
			for _, typeURL := range names {
				tl := types[typeURL]
				if tl.broken {
					continue
				}
				for _, sp := range tl.entries {
					if !opened {
						e.stream(k.delta, k.nodeID)
						opened = true
					}
					if err := copySpooled(e, sp); err != nil {
						return err
					}
				}
			}
		}
		err := e.close()
		size = e.n
		return err
	})
	if err != nil {
		r.met.skipped.Inc()
		r.log.Warn("last state: snapshot not written", "err", err)
		return
	}
	r.met.writes.Inc()
	r.met.bytes.Set(float64(size))
}

func copySpooled(e *encoder, sp spooled) error {
	f, err := os.Open(sp.file)
	if err != nil {
		return err
	}
	defer f.Close()
	e.response(sp.typeURL, sp.version, sp.size, f)
	return e.err
}

func copyNameTable(e *encoder, sp spooled) error {
	f, err := os.Open(sp.file)
	if err != nil {
		return err
	}
	defer f.Close()
	e.nameTable(sp.size, f)
	return e.err
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (r *Recorder) notify() {
	for _, ch := range r.flushes {
		close(ch)
	}
	r.flushes = r.flushes[:0]
	r.mu.Lock()
	r.writes++
	close(r.written)
	r.written = make(chan struct{})
	r.mu.Unlock()
}

var _ mux.Recorder = (*Recorder)(nil)
