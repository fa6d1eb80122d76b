package istiod

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"testing"
	"time"
)

// TestFileClientCertificate: the pair is read at each handshake; a missing or expired pair means
// no client certificate, as Istio's agent does for PROV_CERT and FILE_MOUNTED_CERTS.
func TestFileClientCertificate(t *testing.T) {
	_, serving := pki(t, "workload")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert-chain.pem"), filepath.Join(dir, "key.pem")
	get := FileClientCertificate(certFile, keyFile, time.Now)
	if c, err := get(nil); err != nil || len(c.Certificate) != 0 {
		t.Fatalf("missing files: %v, %d certificates", err, len(c.Certificate))
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(serving.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serving.Certificate[0]})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
	if c, err := get(nil); err != nil || len(c.Certificate) != 1 {
		t.Fatalf("valid pair: %v, %d certificates", err, len(c.Certificate))
	}
	later := FileClientCertificate(certFile, keyFile, func() time.Time { return time.Now().Add(48 * time.Hour) })
	if c, err := later(nil); err != nil || len(c.Certificate) != 0 {
		t.Fatalf("expired pair: %v, %d certificates", err, len(c.Certificate))
	}
}
