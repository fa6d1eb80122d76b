package h2grpc

import (
	"testing"

	"golang.org/x/net/http2"
)

// The server's send path alone: a handler answers each small request with a message of
// respSize written in 32 KiB pieces (BeginMsg/Write, as the proxy forwards), to a raw-frame
// client that reads with reused frames and grants its windows back every 256 KiB, so that
// what allocates per round is the server's.

const (
	respSize  = 1 << 20
	respPiece = 32 << 10
)

func startSendServer(tb testing.TB) string {
	body := pattern(respSize, 2)
	_, path := startServer(tb, ServerConfig{}, map[string]Handler{testMethod: func(ss *ServerStream) error {
		for {
			req, err := ss.RecvMsg()
			if err != nil {
				return nil
			}
			req.Free()
			if err := ss.BeginMsg(respSize); err != nil {
				return err
			}
			for off := 0; off < respSize; off += respPiece {
				if err := ss.Write(body[off : off+respPiece]); err != nil {
					return err
				}
			}
		}
	}})
	return path
}

// sendRound sends one request on stream 1 and reads the whole response.
func sendRound(c *rawClient, req []byte) {
	if err := c.fr.WriteData(1, false, req); err != nil {
		c.t.Fatal(err)
	}
	got, unacked := 0, 0
	for got < prefixLen+respSize {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatal(err)
		}
		d, ok := f.(*http2.DataFrame)
		if !ok {
			continue
		}
		got += len(d.Data())
		unacked += len(d.Data())
		if unacked >= 256<<10 {
			c.fr.WriteWindowUpdate(0, uint32(unacked))
			c.fr.WriteWindowUpdate(1, uint32(unacked))
			unacked = 0
		}
	}
	if unacked > 0 {
		c.fr.WriteWindowUpdate(0, uint32(unacked))
		c.fr.WriteWindowUpdate(1, uint32(unacked))
	}
}

func dialSendClient(t testing.TB, path string) *rawClient {
	c := dialRaw(t, path, true, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	c.fr.SetReuseFrames()
	c.fr.WriteWindowUpdate(0, 1<<20)
	c.open(1, false)
	return c
}

// TestServerSendAllocs gates the send path on allocations: a 1 MiB response in 32 KiB
// pieces, with its request, allocates a handful of objects (the request's buffer slice),
// not one or more per frame (64 DATA frames, 8 WINDOW_UPDATEs read). Measured: 4 (12 before
// the server parsed WINDOW_UPDATE itself).
func TestServerSendAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("counts allocations over many rounds")
	}
	if raceEnabled {
		// sync.Pool drops a quarter of what is put back under the race detector (connbuf.go's
		// buffers come from one): 20 allocations there.
		t.Skip("allocation gates run without the race detector")
	}
	c := dialSendClient(t, startSendServer(t))
	req := prefixed(0, 3, []byte("ack"))
	sendRound(c, req) // warm: pools and buffers
	allocs := testing.AllocsPerRun(50, func() { sendRound(c, req) })
	t.Logf("%.1f allocations per 1 MiB response", allocs)
	if allocs > 8 {
		t.Fatalf("%.1f allocations per 1 MiB response in 32 KiB pieces, want at most 8", allocs)
	}
}

func BenchmarkServerSend(b *testing.B) {
	c := dialSendClient(b, startSendServer(b))
	req := prefixed(0, 3, []byte("ack"))
	sendRound(c, req)
	b.SetBytes(respSize)
	b.ReportAllocs()
	for b.Loop() {
		sendRound(c, req)
	}
}
