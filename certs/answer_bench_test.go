package certs

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// stamps records, per rotation, when each traceStage was first reached and when the client had
// decoded the secret (slot numTraceStages), in nanoseconds since base; 0 is "not reached".
type stamps struct {
	base time.Time
	at   [numTraceStages + 1]atomic.Int64
}

func newStamps() *stamps { return &stamps{base: time.Now()} }

func (s *stamps) mark(st traceStage) { s.at[st].CompareAndSwap(0, int64(time.Since(s.base))) }
func (s *stamps) decoded()           { s.mark(numTraceStages) }
func (s *stamps) reset() {
	for i := range s.at {
		s.at[i].Store(0)
	}
}

// stageNames label the interval that ends at each stage (from the previous stage reached).
var stageNames = [numTraceStages + 1]string{
	traceParsed:    "parse",
	traceChecked:   "check",
	traceBuilt:     "build",
	tracePublished: "publish",
	traceWoken:     "wake",
	traceEncoded:   "encode",
	traceSent:      "send",
	numTraceStages: "deliver",
}

// intervals collects, per rotation, the answer-to-decoded time and the breakdown.
type intervals struct {
	total  []float64
	toSend []float64 // answer → the stream's Send returned: the agent's own share
	stages [numTraceStages + 1][]float64
}

// add takes one rotation's stamps; false when the answer or the decode was not stamped.
func (iv *intervals) add(s *stamps) bool {
	prev := s.at[traceAnswer].Load()
	end := s.at[numTraceStages].Load()
	if prev == 0 || end == 0 {
		return false
	}
	iv.total = append(iv.total, float64(end-prev)/1e3)
	if sent := s.at[traceSent].Load(); sent != 0 {
		iv.toSend = append(iv.toSend, float64(sent-prev)/1e3)
	}
	for st := traceAnswer + 1; st <= numTraceStages; st++ {
		if v := s.at[st].Load(); v != 0 {
			iv.stages[st] = append(iv.stages[st], float64(v-prev)/1e3)
			prev = v
		}
	}
	return true
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// report publishes the run's medians: answer-to-envoy-µs/op, and one "<stage>-µs" per stage
// reached (medians of each interval; they need not add up exactly to the total's median), and
// answer-to-send-µs, the median up to the stream's Send: the agent's own share. The rest,
// deliver-µs, is gRPC's write and the in-process client's wake-up and decode; with the client in
// the same process it also depends on how long the agent's path left the other P idle (a runtime
// trace showed the client's reader waiting ~45 µs for its thread, parked in epoll, to be woken by
// the kernel after a ~100 µs path), which a real Envoy, with its own threads, does not share.
func (iv *intervals) report(b *testing.B) {
	b.ReportMetric(median(iv.total), "answer-to-envoy-µs/op")
	b.ReportMetric(median(iv.toSend), "answer-to-send-µs")
	for st, v := range iv.stages {
		if len(v) > 0 && stageNames[st] != "" {
			b.ReportMetric(median(v), stageNames[st]+"-µs")
		}
	}
}

// BenchmarkAnswerToEnvoy times a rotation from the moment the CA client's call returns the signed
// chain to the moment the SDS client (go-control-plane's generated client, as Envoy's stand-in)
// has decoded the new secret: answer-to-envoy-µs/op is the run's median (p50) of that interval,
// the other "-µs" metrics the medians of its stages (trace.go). agent=wingman is the agent;
// agent=istio-ref does Istio's agent's work on the same path (istioref_test.go) against the same
// CA and client in the same run, so the two p50s give a same-run ratio. ns/op is a whole rotation,
// the CA round trip included.
func BenchmarkAnswerToEnvoy(b *testing.B) {
	b.Run("agent=wingman", func(b *testing.B) {
		st := newStamps()
		e := newEnv(b, func(c *Config) { c.KeyType = KeyECDSA; c.trace = st.mark })
		c := e.dial()
		c.send("", ResourceDefault)
		c.mustRecv(ResourceDefault)
		var iv intervals
		renewed := e.m.renewals.Load()
		for b.Loop() {
			if err := waitForWaiter(e.ctx, e.clock); err != nil {
				b.Fatal(err)
			}
			if !e.m.keyReady.Load() {
				// The generator makes the next key a lead before the rotation (keyLookAhead).
				e.clock.Set(keyLookAhead(e.clock.Now(), e.m.cur.Load().rotateAt))
				for !e.m.keyReady.Load() {
					time.Sleep(time.Millisecond)
				}
				if err := waitForWaiter(e.ctx, e.clock); err != nil {
					b.Fatal(err)
				}
			}
			st.reset()
			e.clock.Set(e.m.cur.Load().rotateAt)
			if _, err := c.recv(); err != nil {
				b.Fatal(err)
			}
			st.decoded()
			c.send(c.nonce, ResourceDefault)
			if !iv.add(st) {
				b.Fatal("a rotation was not traced from the answer to the decode")
			}
			// The rotator counts the renewal just after the push the client has seen.
			for want := renewed + 1; e.m.renewals.Load() < want; {
				time.Sleep(10 * time.Microsecond)
			}
			renewed++
		}
		iv.report(b)
	})
	b.Run("agent=istio-ref", func(b *testing.B) {
		st := newStamps()
		e := newEnv(b, func(c *Config) { c.KeyType = KeyECDSA })
		r, c := startIstioRef(e, st.mark, nil)
		c.send("", ResourceDefault)
		c.mustRecv(ResourceDefault)
		var iv intervals
		for b.Loop() {
			st.reset()
			select {
			case r.push <- struct{}{}:
			case <-e.ctx.Done():
				b.Fatal(e.ctx.Err())
			}
			if _, err := c.recv(); err != nil {
				b.Fatal(err)
			}
			st.decoded()
			c.send(c.nonce, ResourceDefault)
			if !iv.add(st) {
				b.Fatal("a rotation was not traced from the answer to the decode")
			}
		}
		iv.report(b)
	})
}
