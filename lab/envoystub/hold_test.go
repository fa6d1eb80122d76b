package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestAckHoldWaitsForSIGUSR2: with PERF_ACK_HOLD=1 the stand-in reports the first clusters and
// holds its ACK ("hold"); the server sees the ACK only after SIGUSR2 ("release"), and the
// listeners, asked for after the clusters' ACK, follow.
func TestAckHoldWaitsForSIGUSR2(t *testing.T) {
	dir := t.TempDir()
	xdsPath, sdsPath := filepath.Join(dir, "xds.sock"), filepath.Join(dir, "sds.sock")
	a := startAgent(t, xdsPath, sdsPath)
	bs := fmt.Sprintf(`{"node":{"id":"sidecar~1.2.3.4~a.ns~ns.svc.cluster.local"},"admin":{"address":{"socket_address":{"port_value":%d}}},`+
		`"dynamic_resources":{"ads_config":{"api_type":"DELTA_GRPC"}},"static_resources":{"clusters":[`+
		`{"name":"xds-grpc","load_assignment":{"endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"pipe":{"path":%q}}}}]}]}}]}}`,
		freePort(t), xdsPath)
	bsPath := filepath.Join(dir, "b.json")
	if err := os.WriteFile(bsPath, []byte(bs), 0o644); err != nil {
		t.Fatal(err)
	}
	events := &log{ch: eventSink(t, filepath.Join(dir, "ev.sock"))}
	t.Setenv("PERF_EVENTS", "unix:"+filepath.Join(dir, "ev.sock"))
	t.Setenv("PERF_ACK_HOLD", "1")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- run(rctx, []string{"-c", bsPath}) }()

	events.next(t, ctx, func(e event) bool { return e.Ev == "push" && e.Type == clusterType && e.Version == "cds-1" }, "clusters")
	events.next(t, ctx, func(e event) bool { return e.Ev == "hold" && e.Type == clusterType && e.Version == "cds-1" }, "hold")
	released := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil { // run's handler has it since before the hold
		t.Fatal(err)
	}
	events.next(t, ctx, func(e event) bool { return e.Ev == "release" && e.Type == clusterType }, "release")
	select {
	case at := <-a.acks:
		if at.Before(released) {
			t.Errorf("the clusters' ACK reached the server %v before the release", released.Sub(at))
		}
	case <-ctx.Done():
		t.Fatal("the server saw no ACK of the clusters after the release")
	}
	events.next(t, ctx, func(e event) bool { return e.Ev == "push" && e.Type == listenerType }, "listeners")
	stop()
	if err := <-errc; err != nil {
		t.Errorf("run: %v", err)
	}
}
