package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/internal/testca"
)

// TestCASettingsEndToEnd runs the agent against a real CA (internal/testca over TLS) and checks
// the CA settings as Istio's agent applies them: CA_ADDR picks the CA (discoveryAddress points
// elsewhere), ISTIOD_SAN is the name the CA's certificate is verified for, CA_HEADER_* and
// ISTIO_META_CLUSTER_ID arrive as gRPC metadata, ISTIO_META_CERT_SIGNER as the request's CertSigner
// metadata, SECRET_TTL is the validity asked for, OUTPUT_CERTS
// receives the files, 0644 when KUBERNETES_SERVICE_HOST is set (Istio's
// security.WorkloadKeyCertFileMode rule), and the SPIFFE ID is built from TRUST_DOMAIN,
// POD_NAMESPACE and SERVICE_ACCOUNT.
func TestCASettingsEndToEnd(t *testing.T) {
	ca, err := testca.New(testca.Config{Token: "token", TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ca.Serve(ctx, lis) }()
	defer func() { cancel(); <-served }()

	out := t.TempDir()
	p := newPod(t, "", "CA_ADDR="+lis.Addr().String(), "ISTIOD_SAN="+testca.ServerName,
		"CA_HEADER_x-wingman-test=ca-header", "ISTIO_META_CLUSTER_ID=cluster-7", "SECRET_TTL=2h",
		"OUTPUT_CERTS="+out, "KUBERNETES_SERVICE_HOST=10.96.0.1", "TRUST_DOMAIN=example.org",
		"ISTIO_META_CERT_SIGNER=my-signer")
	if err := os.WriteFile(filepath.Join(p.dir, istiodRootPath), ca.ServingRootPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, errb := p.cmd(t, "proxy", "sidecar")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	}()

	chainPath := filepath.Join(out, "cert-chain.pem")
	deadline := time.Now().Add(30 * time.Second)
	var chain []byte
	for {
		if chain, err = os.ReadFile(chainPath); err == nil && len(chain) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate in OUTPUT_CERTS; CA requests %d; agent stderr:\n%s", ca.Requests(), errb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	block, _ := pem.Decode(chain)
	if block == nil {
		t.Fatalf("cert-chain.pem is not PEM: %q", chain)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got != 2*time.Hour {
		t.Errorf("validity %v, want SECRET_TTL 2h", got)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://example.org/ns/default/sa/default" {
		t.Errorf("identity %v", leaf.URIs)
	}
	md := ca.LastMetadata()
	if v := md.Get("x-wingman-test"); len(v) != 1 || v[0] != "ca-header" {
		t.Errorf("CA_HEADER metadata %v", md)
	}
	if v := md.Get("clusterid"); len(v) != 1 || v[0] != "cluster-7" {
		t.Errorf("ClusterID metadata %v", md)
	}
	if got := ca.LastRequestMetadata()["CertSigner"]; got != "my-signer" {
		t.Errorf("CertSigner in the request's metadata %q, want ISTIO_META_CERT_SIGNER's my-signer", got)
	}
	for _, f := range []string{"key.pem", "cert-chain.pem", "root-cert.pem"} {
		st, err := os.Stat(filepath.Join(out, f))
		if err != nil {
			t.Error(err)
		} else if st.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v; want 0644 with KUBERNETES_SERVICE_HOST", f, st.Mode().Perm())
		}
	}
}
