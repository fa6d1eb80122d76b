package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wingman-mesh/wingman/laststate"
	"github.com/wingman-mesh/wingman/mux"
)

// startRecorded is startWingman with the last-state recorder on (WINGMAN_LAST_STATE): every
// response is spooled to a tmpfs as it is forwarded and each ACK rewrites the snapshot, on the
// recorder's goroutine. Skipped where /dev/shm is not a tmpfs.
func startRecorded(tb testing.TB, upstream string) string {
	dir, err := os.MkdirTemp("/dev/shm", "wingman-bench-")
	if err != nil {
		tb.Skipf("no /dev/shm: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	certs := laststate.Certs{Chain: []byte("chain"), Key: []byte("key"), Roots: []byte("roots")}
	rec, err := laststate.NewRecorder(laststate.RecorderConfig{Dir: dir, Certs: func() (laststate.Certs, bool) { return certs, true }})
	if err != nil {
		tb.Skip(err)
	}
	sock := filepath.Join(tb.TempDir(), "XDS")
	p, err := mux.New(mux.Config{SocketPath: sock, Upstream: mux.UpstreamConfig{Address: upstream, Plaintext: true}, Recorder: rec})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := mux.Listen(sock)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc, rerr := make(chan error, 1), make(chan error, 1)
	go func() { errc <- p.Serve(ctx, l) }()
	go func() { rerr <- rec.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-errc; <-rerr })
	return sock
}

// BenchmarkForwardRecorded is BenchmarkForward with the last-state recorder on: the push
// latency and the forwarding goroutines' allocations it adds (compare in the same run).
func BenchmarkForwardRecorded(b *testing.B) { benchForward(b, startRecorded) }
