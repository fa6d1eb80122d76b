package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// TestKeysAndCSR: key PEM types follow Istio's encodings; the CSR carries only an empty O and a
// single critical URI SAN.
func TestKeysAndCSR(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		pem  string
	}{
		{"ecdsa-p256", Config{KeyType: KeyECDSA, ECCCurve: "P256"}, "EC PRIVATE KEY"},
		{"ecdsa-p384", Config{KeyType: KeyECDSA, ECCCurve: "P384"}, "EC PRIVATE KEY"},
		{"ecdsa-pkcs8", Config{KeyType: KeyECDSA, ECCCurve: "P256", PKCS8: true}, "PRIVATE KEY"},
		{"rsa", Config{KeyType: KeyRSA, RSAKeySize: 2048}, "RSA PRIVATE KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg.withDefaults()
			k, err := generateKey(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			block, _ := pem.Decode(k.pem)
			if block == nil || block.Type != tc.pem {
				t.Fatalf("key PEM type %v, want %s", block, tc.pem)
			}
			switch pub := k.signer.Public().(type) {
			case *ecdsa.PublicKey:
				if want := map[string]elliptic.Curve{"P256": elliptic.P256(), "P384": elliptic.P384()}[cfg.ECCCurve]; pub.Curve != want {
					t.Errorf("curve %v", pub.Curve.Params().Name)
				}
			case *rsa.PublicKey:
				if pub.N.BitLen() != 2048 {
					t.Errorf("RSA bits %d", pub.N.BitLen())
				}
			}
			id := "spiffe://cluster.local/ns/ns1/sa/sa1"
			csrPEM, err := createCSR(k.signer, id)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := pem.Decode(csrPEM)
			csr, err := x509.ParseCertificateRequest(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if err := csr.CheckSignature(); err != nil {
				t.Fatal(err)
			}
			if len(csr.URIs) != 1 || csr.URIs[0].String() != id || len(csr.DNSNames) != 0 {
				t.Errorf("SANs %v %v", csr.URIs, csr.DNSNames)
			}
			if csr.Subject.CommonName != "" || len(csr.Subject.Organization) != 1 || csr.Subject.Organization[0] != "" {
				t.Errorf("subject %+v", csr.Subject)
			}
			critical := false
			for _, ext := range csr.Extensions {
				if ext.Id.Equal(oidSubjectAltName) {
					critical = ext.Critical
				}
			}
			if !critical {
				t.Error("SAN extension is not critical")
			}
		})
	}
}

// TestConfigValidation: bad settings are refused naming the setting.
func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{CAAddr: "no-port", Namespace: "a", ServiceAccount: "b"},
		{CAAddr: "h:1"},
		{CAAddr: "h:1", Namespace: "a", ServiceAccount: "b", ECCCurve: "P521"},
		{CAAddr: "h:1", Namespace: "a", ServiceAccount: "b", GracePeriodRatio: 0.5, GracePeriodRatioJitter: 0.6},
		{},
	} {
		if _, err := NewManager(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if got := CARootPathFor(CARootSearch{ProvCert: "/etc/prov/"}); got != "/etc/prov/root-cert.pem" {
		t.Errorf("PROV_CERT root: %s", got)
	}
	if got := CARootPathFor(CARootSearch{}); got != "./var/run/secrets/istio/root-cert.pem" {
		t.Errorf("default root: %s", got)
	}
}
