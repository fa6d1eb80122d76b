package meshlab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// ServerName is the DNS name in meshlab's serving certificate, Istiod's name as the agent
// expects it (give it to the agent as ISTIOD_SAN).
const ServerName = "istiod.istio-system.svc"

// Paths of the files meshlab writes under Config.OutputDir, relative as the agent reads them.
const (
	RootCertPath = "var/run/secrets/istio/root-cert.pem"
	TokenPath    = "var/run/secrets/tokens/istio-token"
)

// servingPKI is meshlab's own root and the serving certificate it signs. Immutable.
type servingPKI struct {
	rootPEM []byte
	cert    tls.Certificate
}

// newServingPKI makes a root and a serving certificate for ServerName, localhost and the
// loopback addresses, valid in real time (TLS checks the wall clock).
func newServingPKI() (*servingPKI, error) {
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("meshlab: root key: %w", err)
	}
	now := time.Now()
	rootTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"cluster.local"}, CommonName: "meshlab serving root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, rootKey.Public(), rootKey)
	if err != nil {
		return nil, fmt.Errorf("meshlab: root: %w", err)
	}
	root, err := x509.ParseCertificate(rootDER)
	if err != nil {
		return nil, fmt.Errorf("meshlab: root: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("meshlab: serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ServerName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{ServerName, "istiod", "localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root, key.Public(), rootKey)
	if err != nil {
		return nil, fmt.Errorf("meshlab: serving certificate: %w", err)
	}
	return &servingPKI{
		rootPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rootDER}),
		cert:    tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: nil},
	}, nil
}

// randomToken returns a fresh bearer token.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("meshlab: token: %w", err)
	}
	return "meshlab-" + hex.EncodeToString(b), nil
}

// writeAgentFiles writes the root bundle and the token under root.
func writeAgentFiles(root string, rootBundle []byte, token string) error {
	for _, f := range []struct {
		rel  string
		data []byte
	}{{RootCertPath, rootBundle}, {TokenPath, []byte(token)}} {
		path := filepath.Join(root, f.rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("meshlab: %w", err)
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o644); err != nil {
			return fmt.Errorf("meshlab: write %s: %w", path, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("meshlab: write %s: %w", path, err)
		}
	}
	return nil
}
