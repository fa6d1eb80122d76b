package h2grpc

import (
	"context"
	"io"
	"testing"

	"google.golang.org/grpc/mem"
)

// Allocation budgets of a 1 KB round trip, steady state: the least of 3 AllocsPerRun(200),
// stable over 4-6 runs (client 18, server 20). Counts are process-wide, so they include the
// grpc-go peer's: here the peers use rawCodec, whose Unmarshal copies the message out and
// Marshal wraps it (BenchmarkClientTLS/ServerUnix, with the no-copy bufCodec, count 13 and
// 15). Where they come from, by -memprofilerate=1 profiles of those benchmarks:
//
// Client (h2grpc client <-TLS-> grpc-go echo):
//   - ours: none (SendMsg reuses the stream's piece slice; RecvMsgHeader/Read read into the
//     stream's prefix array and the caller's buffer);
//   - net/http transport: the DATA frame read (frameCache.getDataFrame), the WINDOW_UPDATE
//     frames it parses, the TLS record read;
//   - grpc-go server: the received message (pool Get, Stream.read), its write, the
//     message header, the ping/window-update frames of its BDP estimator.
//
// Server (grpc-go client <-Unix-> h2grpc echo):
//   - ours: 1, the BufferSlice RecvMsg returns (its buffer comes from the pool);
//   - net/http server: startFrameWrite (its goroutine per DATA frame), the frames it parses;
//   - grpc-go client: as the server above.
//
// A budget fails 25% over (about 3 allocations): one more allocation per message in our code
// shows, while the peers' occasional pings do not.
func TestAllocsRoundTrip(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	if testing.Short() {
		t.Skip("short")
	}
	const budgetClient, budgetServer = 18, 20

	t.Run("client", func(t *testing.T) {
		p := startGRPCPeer(t, true)
		c := newTestClient(t, p, nil)
		s, err := c.Open(testCtx(t), testMethod)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		msg := mem.BufferSlice{mem.SliceBuffer(pattern(1000, 1))}
		buf := make([]byte, 2048)
		roundTrip := func() {
			if err := s.SendMsg(msg); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RecvMsgHeader(); err != nil {
				t.Fatal(err)
			}
			for {
				_, err := s.Read(buf)
				if err == io.EOF {
					return
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		checkBudget(t, budgetClient, roundTrip)
	})

	t.Run("server", func(t *testing.T) {
		_, path := startServer(t, ServerConfig{}, map[string]Handler{testMethod: echoHandler})
		cc := grpcUnixClient(t, path)
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		cs, err := cc.NewStream(ctx, bidi, testMethod)
		if err != nil {
			t.Fatal(err)
		}
		msg := pattern(1000, 1)
		checkBudget(t, budgetServer, func() {
			if err := cs.SendMsg(&msg); err != nil {
				t.Fatal(err)
			}
			var got []byte
			if err := cs.RecvMsg(&got); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// checkBudget runs f to warm up, then takes the least of 3 measurements (other goroutines
// of the process, such as timers, only add).
func checkBudget(t *testing.T, budget float64, f func()) {
	t.Helper()
	for range 20 {
		f()
	}
	least := -1.0
	for range 3 {
		if n := testing.AllocsPerRun(200, f); least < 0 || n < least {
			least = n
		}
	}
	t.Logf("%.1f allocations per round trip (budget %.0f)", least, budget)
	if least > budget*1.25 {
		t.Fatalf("%.1f allocations per round trip, budget %.0f (+25%%)", least, budget)
	}
}
