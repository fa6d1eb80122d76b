package certs

import (
	"context"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/fastpath"
)

// BenchmarkRotation measures one rotation end to end: the fake clock reaches the rotation time
// → CSR (key already generated in the background) → in-process CA over TLS gRPC → checks →
// push → the new secret decoded on an SDS stream. Extra metrics: local-µs/op is the agent's own
// work (everything but the CA round trip), max-gap-ns the longest time, on the certificates'
// clock, that the stream held no valid secret.
func BenchmarkRotation(b *testing.B) {
	for _, kt := range []struct {
		name string
		kt   KeyType
	}{{"key=ecdsa", KeyECDSA}, {"key=rsa", KeyRSA}} {
		b.Run(kt.name, func(b *testing.B) {
			e := newEnv(b, func(c *Config) { c.KeyType = kt.kt })
			c := e.dial()
			c.send("", ResourceDefault)
			held, err := checkPair(c.mustRecv(ResourceDefault)[ResourceDefault], e.clock.Now(), e.ca.RootPEM())
			if err != nil {
				b.Fatal(err)
			}
			var local time.Duration
			var maxGap time.Duration
			renewed := e.m.renewals.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := waitForWaiter(e.ctx, e.clock); err != nil {
					b.Fatal(err)
				}
				if !e.m.keyReady.Load() {
					// The generator makes the next key a lead before the rotation (keyLookAhead):
					// move the clock there and wait for the key untimed (RSA-2048 takes ~50 ms).
					b.StopTimer()
					w := e.m.cur.Load()
					e.clock.Set(keyLookAhead(e.clock.Now(), w.rotateAt))
					for !e.m.keyReady.Load() {
						time.Sleep(time.Millisecond)
					}
					if err := waitForWaiter(e.ctx, e.clock); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				e.clock.Set(e.m.cur.Load().rotateAt)
				sec := c.mustRecv(ResourceDefault)[ResourceDefault]
				now := e.clock.Now()
				if gap := now.Sub(held.NotAfter); gap > maxGap {
					maxGap = gap
				}
				b.StopTimer()
				if held, err = checkPair(sec, now, e.ca.RootPEM()); err != nil {
					b.Fatal(err)
				}
				// lastLocal is stored just after the push the client has seen.
				for want := renewed + 1; e.m.renewals.Load() < want; {
					time.Sleep(10 * time.Microsecond)
				}
				renewed++
				b.StartTimer()
				local += time.Duration(e.m.lastLocal.Load())
			}
			b.ReportMetric(float64(local.Microseconds())/float64(b.N), "local-µs/op")
			b.ReportMetric(float64(max(maxGap, 0)), "max-gap-ns")
		})
	}
}

// BenchmarkSDSPush measures one push: a new secret published → the stream's response sent over
// the socket → received by the client. Allocations include both ends of the gRPC stream.
func BenchmarkSDSPush(b *testing.B) {
	e := newEnv(b, nil)
	c := e.dial()
	c.send("", ResourceDefault)
	c.mustRecv(ResourceDefault)
	w := e.m.cur.Load()
	sec := certSecret(ResourceDefault, w.chainPEM, w.keyPEM)
	b.ReportAllocs()
	for b.Loop() {
		e.m.store.publish(sec)
		if _, err := c.stream.Recv(); err != nil {
			b.Fatal(err)
		}
	}
}

// discardStream is an sdsConn whose Send drops the response.
type discardStream struct {
	ctx context.Context
	n   int
}

func (d *discardStream) Send([]byte) error { d.n++; return nil }
func (d *discardStream) Recv() (fastpath.Frame, error) {
	<-d.ctx.Done()
	return fastpath.Frame{}, d.ctx.Err()
}
func (d *discardStream) Context() context.Context { return d.ctx }

// TestPushAllocs budgets the server's own work per push (the gRPC marshal and write excluded).
func TestPushAllocs(t *testing.T) {
	e := newEnv(t, nil)
	<-e.m.Ready()
	ds := &discardStream{ctx: t.Context()}
	st := &sdsStream{s: e.srv, stream: ds, names: map[string]struct{}{ResourceDefault: {}}, sent: map[string]uint64{}}
	allocs := testing.AllocsPerRun(100, func() {
		st.sent[ResourceDefault] = 0
		if err := st.push(nil, false); err != nil {
			t.Fatal(err)
		}
	})
	// 1 the encoded DiscoveryResponse (sized exactly, the time formatted on the stack);
	// 1 the counter string (version suffix and nonce share it).
	if allocs > 2 {
		t.Errorf("%v allocations per push, budget 2", allocs)
	}
	if ds.n == 0 {
		t.Fatal("nothing pushed")
	}
}
