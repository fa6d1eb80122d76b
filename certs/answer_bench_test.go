package certs

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// stamps records, per rotation, when the test CA answered (its OnAnswer hook) and when the SDS
// client had decoded the secret, in nanoseconds since base; 0 is "not reached". Both agents are
// timed from the same point, outside either of them.
type stamps struct {
	base            time.Time
	answer, decoded atomic.Int64
}

func newStamps() *stamps { return &stamps{base: time.Now()} }

func (s *stamps) answered()    { s.answer.CompareAndSwap(0, int64(time.Since(s.base))) }
func (s *stamps) markDecoded() { s.decoded.CompareAndSwap(0, int64(time.Since(s.base))) }
func (s *stamps) reset()       { s.answer.Store(0); s.decoded.Store(0) }
func (s *stamps) interval() (float64, bool) {
	a, d := s.answer.Load(), s.decoded.Load()
	return float64(d-a) / 1e3, a != 0 && d != 0
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkAnswerToEnvoy times a rotation from the moment the CA's handler returns the signed
// chain to the moment the SDS client (go-control-plane's generated client, as Envoy's stand-in)
// has decoded the new secret: answer-to-envoy-µs/op is the run's median (p50) of that interval.
// It includes the CA's gRPC write and the agent's CA client reading it. agent=wingman is the
// agent; agent=istio-ref does Istio's agent's work on the same path (istioref_test.go) against
// the same CA and client in the same run, so the two p50s give a same-run ratio. ns/op is a whole
// rotation, the CA round trip included. For where the time goes inside the agent, profile the
// benchmark (-cpuprofile, -trace): no stage hooks are compiled into the agent.
func BenchmarkAnswerToEnvoy(b *testing.B) {
	b.Run("agent=wingman", func(b *testing.B) {
		st := newStamps()
		e := newEnv(b, func(c *Config) { c.KeyType = KeyECDSA })
		c := e.dial()
		c.send("", ResourceDefault)
		c.mustRecv(ResourceDefault)
		e.ca.OnAnswer(st.answered)
		defer e.ca.OnAnswer(nil)
		var total []float64
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
			st.markDecoded()
			c.send(c.nonce, ResourceDefault)
			us, ok := st.interval()
			if !ok {
				b.Fatal("a rotation was not timed from the CA's answer to the decode")
			}
			total = append(total, us)
			// The rotator counts the renewal just after the push the client has seen.
			for want := renewed + 1; e.m.renewals.Load() < want; {
				time.Sleep(10 * time.Microsecond)
			}
			renewed++
		}
		b.ReportMetric(median(total), "answer-to-envoy-µs/op")
	})
	b.Run("agent=istio-ref", func(b *testing.B) {
		st := newStamps()
		e := newEnv(b, func(c *Config) { c.KeyType = KeyECDSA })
		r, c := startIstioRef(e, nil)
		c.send("", ResourceDefault)
		c.mustRecv(ResourceDefault)
		e.ca.OnAnswer(st.answered)
		defer e.ca.OnAnswer(nil)
		var total []float64
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
			st.markDecoded()
			c.send(c.nonce, ResourceDefault)
			us, ok := st.interval()
			if !ok {
				b.Fatal("a rotation was not timed from the CA's answer to the decode")
			}
			total = append(total, us)
		}
		b.ReportMetric(median(total), "answer-to-envoy-µs/op")
	})
}
