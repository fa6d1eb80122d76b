package certs

import (
	"context"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
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
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := e.clock.waitForWaiter(e.ctx); err != nil {
					b.Fatal(err)
				}
				if !e.m.keyReady.Load() {
					// Production rotations come hours apart; the background generator has the
					// next key long before. Wait for it untimed (RSA-2048 takes ~50 ms).
					b.StopTimer()
					for !e.m.keyReady.Load() {
						time.Sleep(time.Millisecond)
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
		if err := e.m.store.publish(sec); err != nil {
			b.Fatal(err)
		}
		if _, err := c.stream.Recv(); err != nil {
			b.Fatal(err)
		}
	}
}

// discardStream is a StreamSecrets server stream whose Send drops the response.
type discardStream struct {
	grpc.ServerStream
	ctx context.Context
	n   int
}

func (d *discardStream) Send(*discovery.DiscoveryResponse) error { d.n++; return nil }
func (d *discardStream) Recv() (*discovery.DiscoveryRequest, error) {
	<-d.ctx.Done()
	return nil, d.ctx.Err()
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
	// 1 the DiscoveryResponse; 1 the counter string (version suffix and nonce share it);
	// 2 the RFC3339 time string and its concatenation with the counter.
	if allocs > 4 {
		t.Errorf("%v allocations per push, budget 4", allocs)
	}
	if ds.n == 0 {
		t.Fatal("nothing pushed")
	}
}
