package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	pb "istio.io/api/security/v1alpha1"

	"github.com/wingman-mesh/wingman/lab/testca"
)

// restored has another lab/testca sign a workload certificate for ns/sa, as a last-state
// snapshot holds it: chain, PKCS#8 key, roots.
func restored(t *testing.T, ns, sa string) (chain, key, roots []byte) {
	t.Helper()
	ca, err := testca.New(testca.Config{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	u := &url.URL{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/" + ns + "/sa/" + sa}
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, k)
	resp, err := ca.CreateCertificate(context.Background(), &pb.IstioCertificateRequest{Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(k)
	c := resp.GetCertChain()
	return []byte(strings.Join(c[:len(c)-1], "")), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), []byte(c[len(c)-1])
}

// TestSeedServesUntilTheCASigns: with the CA down, a restored certificate is put in service (SDS
// and the client certificate), refused when it names another workload or once one is in
// service; when the CA is back the manager's first retry replaces it with the CA's.
func TestSeedServesUntilTheCASigns(t *testing.T) {
	e := newEnvWith(t, testca.ModeUnavailable, nil)
	oc, ok, or := restored(t, "default", "other")
	if err := e.m.Seed(oc, ok, or); err == nil || !strings.Contains(err.Error(), "does not name") {
		t.Fatalf("a certificate of another workload: %v", err)
	}
	chain, key, roots := restored(t, "default", "sleep")
	ch := make(chan struct{}, 1)
	cancel := e.m.Subscribe(ch)
	defer cancel()
	if err := e.m.Seed(chain, key, roots); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.m.Ready():
	default:
		t.Fatal("not ready with the restored certificate")
	}
	if got, _, _, ok := e.m.Current(); !ok || !bytes.Equal(got, chain) {
		t.Fatal("the restored certificate is not the one served")
	}
	if err := e.m.Seed(chain, key, roots); !errors.Is(err, ErrAlreadyServing) {
		t.Fatalf("second seed: %v", err)
	}
	e.ca.SetMode(testca.ModeOK)
	e.rotate() // due at once: the next retry asks the CA
	for {
		if got, _, r, ok := e.m.Current(); ok && !bytes.Equal(got, chain) {
			if !bytes.Equal(r, e.ca.RootPEM()) {
				t.Fatal("the CA's certificate installed without its root")
			}
			return
		}
		select {
		case <-ch:
		case <-e.ctx.Done():
			t.Fatal("the CA's certificate never replaced the restored one")
		}
	}
}
