package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
)

// privateKey is a freshly generated workload key with its PEM encoding. Immutable.
type privateKey struct {
	signer crypto.Signer
	pem    []byte
	csr    []byte // PEM CSR for the workload identity, signed ahead by the key generator
}

// generateKey makes a key of the configured type and encodes it as Istio does: PKCS#1
// "RSA PRIVATE KEY", SEC1 "EC PRIVATE KEY", or PKCS#8 "PRIVATE KEY" when cfg.PKCS8.
func generateKey(cfg *Config) (privateKey, error) {
	var signer crypto.Signer
	var err error
	switch cfg.KeyType {
	case KeyECDSA:
		curve := elliptic.P256()
		if cfg.ECCCurve == "P384" {
			curve = elliptic.P384()
		}
		signer, err = ecdsa.GenerateKey(curve, rand.Reader)
	default:
		signer, err = rsa.GenerateKey(rand.Reader, cfg.RSAKeySize)
	}
	if err != nil {
		return privateKey{}, fmt.Errorf("generate %s key: %w", keyName(cfg), err)
	}
	var block pem.Block
	if cfg.PKCS8 {
		der, err := x509.MarshalPKCS8PrivateKey(signer)
		if err != nil {
			return privateKey{}, fmt.Errorf("encode %s key as PKCS#8: %w", keyName(cfg), err)
		}
		block = pem.Block{Type: "PRIVATE KEY", Bytes: der}
	} else {
		switch k := signer.(type) {
		case *ecdsa.PrivateKey:
			der, err := x509.MarshalECPrivateKey(k)
			if err != nil {
				return privateKey{}, fmt.Errorf("encode %s key as SEC1: %w", keyName(cfg), err)
			}
			block = pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
		case *rsa.PrivateKey:
			block = pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
		}
	}
	return privateKey{signer: signer, pem: pem.EncodeToMemory(&block)}, nil
}

func keyName(cfg *Config) string {
	if cfg.KeyType == KeyECDSA {
		return "ECDSA " + cfg.ECCCurve
	}
	return fmt.Sprintf("RSA-%d", cfg.RSAKeySize)
}

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// createCSR returns a PEM CSR whose subject holds only an empty Organization and whose single,
// critical SAN extension is the URI spiffeID, as Istio's agent sends.
func createCSR(key crypto.Signer, spiffeID string) ([]byte, error) {
	// GeneralNames ::= SEQUENCE OF GeneralName; uniformResourceIdentifier is [6] IA5String.
	san, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(spiffeID)}})
	if err != nil {
		return nil, fmt.Errorf("encode SAN %q: %w", spiffeID, err)
	}
	tmpl := &x509.CertificateRequest{
		Subject:         pkix.Name{Organization: []string{""}},
		ExtraExtensions: []pkix.Extension{{Id: oidSubjectAltName, Critical: true, Value: san}},
	}
	if k, ok := key.(*ecdsa.PrivateKey); ok && k.Curve == elliptic.P384() {
		tmpl.SignatureAlgorithm = x509.ECDSAWithSHA384
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("create CSR for %q: %w", spiffeID, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}
