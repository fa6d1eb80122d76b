package status

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wingman-mesh/wingman/bootstrap"
)

func TestProbeTarget(t *testing.T) {
	pod := netip.MustParseAddr("10.1.2.3")
	for _, c := range []struct {
		ip     netip.Addr
		legacy bool
		want   string
	}{
		{pod, false, "10.1.2.3"},
		{pod, true, "localhost"},
		{netip.MustParseAddr("fd00::5"), false, "fd00::5"},
		{netip.Addr{}, false, ""},
		{netip.Addr{}, true, "localhost"},
	} {
		if got := ProbeTarget(c.ip, c.legacy); got != c.want {
			t.Errorf("ProbeTarget(%v, %v) = %q, want %q", c.ip, c.legacy, got, c.want)
		}
	}
}

// TestLegacyLocalhostProbeDestination runs an application that listens on 127.0.0.1 only,
// in a pod whose IP is 127.0.0.2: as in Istio, its probes fail when sent to the pod IP and
// pass with REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION, whatever host the probe names
// (Istio's handleAppProbeHTTPGet and handleAppProbeTCPSocket ignore it).
func TestLegacyLocalhostProbeDestination(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "app ok")
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Serve(ln) }()
	t.Cleanup(func() { _ = app.Close(); <-done })
	port := ln.Addr().(*net.TCPAddr).Port
	probers := fmt.Sprintf(`{
		"/app-health/web/readyz": {"httpGet": {"path": "/", "port": %[1]d, "host": "127.0.0.1"}},
		"/app-health/web/livez": {"tcpSocket": {"port": %[1]d, "host": "127.0.0.1"}}}`, port)
	pod := netip.MustParseAddr("127.0.0.2")
	for _, legacy := range []bool{false, true} {
		s, err := New(Config{NoEnvoy: true, AppProbers: probers, ProbeTargetHost: ProbeTarget(pod, legacy)})
		if err != nil {
			t.Fatal(err)
		}
		base, stop := serve(t, s)
		want := 500
		if legacy {
			want = 200
		}
		for _, path := range []string{"/app-health/web/readyz", "/app-health/web/livez"} {
			if code, body := get(t, http.MethodGet, base+path); code != want {
				t.Errorf("legacy=%v %s: %d %q, want %d", legacy, path, code, body, want)
			}
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadinessNoEnvoyWaitsForCertificates: with DISABLE_ENVOY, readiness is Istio's gRPC
// bootstrap probe (grpcready.probe.Check): not ready until the bootstrap loads and, when it
// names a file_watcher provider (OUTPUT_CERTS), until the certificate, key and root files
// exist. Real files, the real check the agent wires in.
func TestReadinessNoEnvoyWaitsForCertificates(t *testing.T) {
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	path := filepath.Join(dir, "grpc-bootstrap.json")
	s, err := New(Config{NoEnvoy: true, GRPCBootstrapPath: path, CheckGRPCBootstrap: bootstrap.ProbeGRPCBootstrap})
	if err != nil {
		t.Fatal(err)
	}
	base, stop := serve(t, s)
	defer func() {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}()
	ready := func(want int, wantBody string) {
		t.Helper()
		code, body := get(t, http.MethodGet, base+"/healthz/ready")
		if code != want || !strings.Contains(body, wantBody) {
			t.Fatalf("ready = %d %q, want %d containing %q", code, body, want, wantBody)
		}
	}
	ready(503, "grpc-bootstrap.json")

	b := bootstrap.GRPCBootstrap{
		XDSServers: []bootstrap.GRPCXDSServer{{ServerURI: "unix:///etc/istio/proxy/XDS",
			ChannelCreds: []bootstrap.GRPCChannelCreds{{Type: "insecure"}}, ServerFeatures: []string{"xds_v3"}}},
		Node: bootstrap.GRPCNode{ID: "sidecar~10.1.2.3~app.ns1~ns1.svc.cluster.local"},
		CertificateProviders: map[string]bootstrap.GRPCCertProvider{"default": {PluginName: "file_watcher",
			Config: bootstrap.FileWatcherConfig{
				CertificateFile:   filepath.Join(certDir, "cert-chain.pem"),
				PrivateKeyFile:    filepath.Join(certDir, "key.pem"),
				CACertificateFile: filepath.Join(certDir, "root-cert.pem"),
				RefreshInterval:   "900s",
			}}},
	}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ready(503, "certificate files not present yet")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i, f := range []string{"cert-chain.pem", "key.pem", "root-cert.pem"} {
		if err := os.WriteFile(filepath.Join(certDir, f), []byte("pem"), 0o600); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			ready(503, "certificate files not present yet")
		}
	}
	ready(200, "")
}
