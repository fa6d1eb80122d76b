package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/wingman-mesh/wingman/lab/testca"
)

// TestProvCertAuthenticatesToCA: with PROV_CERT the agent presents the provisioned
// cert-chain.pem/key.pem to the CA (a server that requires a client certificate) and trusts
// PROV_CERT/root-cert.pem, with no service-account token, as Istio's agent (GetKeyCertsForCA,
// FindRootCAForCA).
func TestProvCertAuthenticatesToCA(t *testing.T) {
	ca, err := testca.New(testca.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rootPEM, serving, err := testca.ServingPKI(time.Hour, testca.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serving},
		MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAnyClientCert})))
	ca.Register(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(lis) })
	defer func() { srv.Stop(); wg.Wait() }()

	// The provisioned credentials: a client certificate (any issuer: the server only requires
	// one) and the root that verifies the CA.
	_, client, err := testca.ServingPKI(time.Hour, "vm.example")
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(client.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	prov, out := t.TempDir(), t.TempDir()
	for name, data := range map[string][]byte{
		"cert-chain.pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: client.Certificate[0]}),
		"key.pem":        pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		"root-cert.pem":  rootPEM,
	} {
		if err := os.WriteFile(filepath.Join(prov, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	p := newPod(t, "", "PROV_CERT="+prov, "CA_ADDR="+lis.Addr().String(), "ISTIOD_SAN="+testca.ServerName, "OUTPUT_CERTS="+out)
	p.env[0] = fmt.Sprintf(`PROXY_CONFIG={"binaryPath": %q, "proxyAdminPort": %d, "statusPort": %d, "discoveryAddress": "127.0.0.1:1", "terminationDrainDuration": "0.1s"}`,
		standinBin, p.admin, freePort(t))
	if err := os.Remove(filepath.Join(p.dir, tokenPath)); err != nil {
		t.Fatal(err)
	}
	c, _, errb := p.cmd(t, "proxy", "sidecar")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Signal(syscall.SIGTERM); _ = c.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(out, "cert-chain.pem")); err == nil && len(b) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate from the CA with PROV_CERT (CA requests %d); agent stderr:\n%s", ca.Requests(), errb)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
