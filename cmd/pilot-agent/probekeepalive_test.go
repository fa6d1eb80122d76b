package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestProbeKeepAliveSetting: application probes rewritten by the injector
// (ISTIO_KUBE_APP_PROBERS) open a new connection to the application per probe by default and
// reuse one with ENABLE_PROBE_KEEPALIVE_CONNECTIONS=true, as Istio's status server.
func TestProbeKeepAliveSetting(t *testing.T) {
	var conns atomic.Int64
	app := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = app.Serve(lis) }()
	defer func() { app.Close(); <-served }()
	appPort := lis.Addr().(*net.TCPAddr).Port

	for _, tc := range []struct {
		keepAlive string
		want      int64
	}{{"", 3}, {"true", 1}} {
		conns.Store(0)
		p := newPod(t, "")
		status := freePort(t)
		p.env[0] = fmt.Sprintf(`PROXY_CONFIG={"binaryPath": %q, "proxyAdminPort": %d, "statusPort": %d, "discoveryAddress": "127.0.0.1:1", "terminationDrainDuration": "0.1s"}`,
			standinBin, p.admin, status)
		p.env = append(p.env, "INSTANCE_IP=127.0.0.1", "ENABLE_PROBE_KEEPALIVE_CONNECTIONS="+tc.keepAlive,
			fmt.Sprintf(`ISTIO_KUBE_APP_PROBERS={"/app-health/app/readyz":{"httpGet":{"path":"/ready","port":%d}}}`, appPort))
		c, _, errb := p.cmd(t, "proxy", "sidecar")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		url := "http://127.0.0.1:" + strconv.Itoa(status) + "/app-health/app/readyz"
		deadline := time.Now().Add(20 * time.Second)
		for ok := 0; ok < 3; {
			resp, err := http.Get(url)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok++
					continue
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("probe never answered 200: %v\n%s", err, errb)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
		if got := conns.Load(); got != tc.want {
			t.Errorf("ENABLE_PROBE_KEEPALIVE_CONNECTIONS=%q: %d connections for 3 probes, want %d", tc.keepAlive, got, tc.want)
		}
	}
}
