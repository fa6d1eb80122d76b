package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGCECredentialFetcher runs the agent as on a GCE VM (CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine,
// no Kubernetes token) against a local stand-in for the metadata server: the agent starts (no
// preflight error about the missing token) and fills the token file with the VM identity token
// requested for the trust domain, which the CA client and xDS upstream then read.
func TestGCECredentialFetcher(t *testing.T) {
	const token = "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjQxMDI0NDQ4MDB9.sig" // exp 2100-01-01
	queries := make(chan string, 8)
	md := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" ||
			r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/identity" {
			http.NotFound(w, r)
			return
		}
		queries <- r.URL.RawQuery
		fmt.Fprint(w, token)
	}))
	defer md.Close()

	p := newPod(t, "", "CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine", "TRUST_DOMAIN=vm.example",
		"GCE_METADATA_HOST="+strings.TrimPrefix(md.URL, "http://"))
	if err := os.Remove(filepath.Join(p.dir, tokenPath)); err != nil {
		t.Fatal(err)
	}
	c, _, errb := p.cmd(t, "proxy", "sidecar")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	p.wait(t, "started")
	select {
	case q := <-queries:
		if q != "audience=vm.example&format=full" {
			t.Errorf("metadata query %q, want the trust domain as audience", q)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the metadata server was never asked for a token")
	}
	if b, err := os.ReadFile(filepath.Join(p.dir, tokenPath)); err != nil || string(b) != token {
		t.Errorf("token file %q, %v", b, err)
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	if err := c.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, errb)
	}
}
