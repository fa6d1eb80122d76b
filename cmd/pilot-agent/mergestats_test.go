package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMergeEnvoyStatsSetting: the status port's /stats/prometheus carries Envoy's own stats
// (scraped from ENVOY_PROMETHEUS_PORT) by default and leaves them out with
// PILOT_AGENT_MERGE_ENVOY_STATS=false, as Istio's status server (pilot/cmd/pilot-agent/status).
func TestMergeEnvoyStatsSetting(t *testing.T) {
	envoyStats := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE envoy_from_the_proxy counter\nenvoy_from_the_proxy 7\n")
	})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = envoyStats.Serve(lis) }()
	defer func() { envoyStats.Close(); <-served }()
	promPort := strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)

	for _, tc := range []struct {
		merge string
		want  bool
	}{{"", true}, {"false", false}} {
		p := newPod(t, "")
		status := freePort(t)
		p.env[0] = fmt.Sprintf(`PROXY_CONFIG={"binaryPath": %q, "proxyAdminPort": %d, "statusPort": %d, "discoveryAddress": "127.0.0.1:1", "terminationDrainDuration": "0.1s"}`,
			standinBin, p.admin, status)
		p.env = append(p.env, "ENVOY_PROMETHEUS_PORT="+promPort, "PILOT_AGENT_MERGE_ENVOY_STATS="+tc.merge)
		c, _, errb := p.cmd(t, "proxy", "sidecar")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		body := ""
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(status) + "/stats/prometheus")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					body = string(b)
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("status port never served /stats/prometheus: %v\n%s", err, errb)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
		if got := strings.Contains(body, "envoy_from_the_proxy 7"); got != tc.want {
			t.Errorf("PILOT_AGENT_MERGE_ENVOY_STATS=%q: Envoy's stats merged %v, want %v\n%.400s", tc.merge, got, tc.want, body)
		}
	}
}
