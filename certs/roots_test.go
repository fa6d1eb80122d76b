package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
)

// testCRL makes a real PEM CRL signed by a fresh CA, revoking serial.
func testCRL(t testing.TB, serial int64) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "plugged-in CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, SubjectKeyId: []byte{1, 2, 3}}
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	issuer, _ := x509.ParseCertificate(der)
	crl, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(serial),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: big.NewInt(serial), RevocationTime: time.Now()}},
		ThisUpdate:                time.Now(), NextUpdate: time.Now().Add(time.Hour)}, issuer, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: crl})
}

func writeAtomic(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestCRLInRootSecrets: with PILOT_ENABLE_CA_CRL and the plugged-in CA's CRL file present, ROOTCA
// and file-root: secrets carry it in validation_context.crl (Istio's SDS server adds it to both);
// when the file changes or goes away, they are pushed again with the new CRL or without one.
func TestCRLInRootSecrets(t *testing.T) {
	crlDir := filepath.Join(tempDir(t), "crl")
	if err := os.Mkdir(crlDir, 0o755); err != nil {
		t.Fatal(err)
	}
	crlPath := filepath.Join(crlDir, "ca-crl.pem")
	crl1 := testCRL(t, 11)
	writeAtomic(t, crlPath, crl1)
	e := newEnv(t, func(c *Config) { c.CRLPath = crlPath; c.FileDebounce = 10 * time.Millisecond; c.Clock = nil })
	rootFile := filepath.Join(tempDir(t), "ca.crt")
	cert, _ := selfSigned(t, "file root")
	writeAtomic(t, rootFile, cert)
	fileRoot := "file-root:" + rootFile

	c := e.dial()
	c.send("", ResourceRootCA, fileRoot)
	want := func(crl []byte) {
		t.Helper()
		seen := map[string]bool{}
		for !seen[ResourceRootCA] || !seen[fileRoot] {
			for name, sec := range c.mustRecv(ResourceRootCA, fileRoot) {
				vc := sec.GetValidationContext()
				got := vc.GetCrl().GetInlineBytes()
				if vc.GetTrustedCa() == nil {
					t.Fatalf("%s: no trusted_ca", name)
				}
				seen[name] = bytes.Equal(got, crl) && (crl != nil) == (vc.GetCrl() != nil)
			}
		}
	}
	want(crl1)
	crl2 := testCRL(t, 22)
	writeAtomic(t, crlPath, crl2)
	want(crl2)
	if err := os.Remove(crlPath); err != nil {
		t.Fatal(err)
	}
	want(nil)
}

// TestPCDSTrustBundleMergedIntoROOTCA: a trust bundle received over PCDS is merged into ROOTCA as
// Istio merges it (each certificate once, sorted); removing it restores the CA's root alone.
func TestPCDSTrustBundleMergedIntoROOTCA(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.send("", ResourceRootCA)
	first := c.mustRecv(ResourceRootCA)[ResourceRootCA].GetValidationContext().GetTrustedCa().GetInlineBytes()
	extra, _ := selfSigned(t, "other mesh")

	if err := e.m.UpdateTrustBundle(extra); err != nil {
		t.Fatal(err)
	}
	merged := c.mustRecv(ResourceRootCA)[ResourceRootCA].GetValidationContext().GetTrustedCa().GetInlineBytes()
	wantCerts := []string{string(first), string(extra)}
	if wantCerts[1] < wantCerts[0] {
		wantCerts[0], wantCerts[1] = wantCerts[1], wantCerts[0]
	}
	if string(merged) != strings.Join(wantCerts, "") {
		t.Fatalf("ROOTCA after the PCDS bundle:\n%s\nwant the CA root and the bundle, sorted", merged)
	}
	// The same bundle again changes nothing; an empty one removes it.
	if err := e.m.UpdateTrustBundle(extra); err != nil {
		t.Fatal(err)
	}
	if err := e.m.UpdateTrustBundle(nil); err != nil {
		t.Fatal(err)
	}
	if got := c.mustRecv(ResourceRootCA)[ResourceRootCA].GetValidationContext().GetTrustedCa().GetInlineBytes(); !bytes.Equal(got, first) {
		t.Fatalf("ROOTCA after removing the bundle:\n%s\nwant the CA root alone", got)
	}
	if err := e.m.UpdateTrustBundle([]byte("not pem")); err == nil {
		t.Fatal("a bundle without certificates was accepted")
	}
}

func TestMergeRootsDedups(t *testing.T) {
	a, _ := selfSigned(t, "a")
	b, _ := selfSigned(t, "b")
	got := mergeRoots(append(append([]byte{}, a...), b...), append(append([]byte{}, b...), a...))
	if bytes.Count(got, []byte("BEGIN CERTIFICATE")) != 2 {
		t.Fatalf("merge kept duplicates:\n%s", got)
	}
}

func TestTrustBundleFromProxyConfig(t *testing.T) {
	pc := &meshconfig.ProxyConfig{ConfigPath: "./etc/istio/proxy", DrainDuration: durationpb.New(time.Second),
		CaCertificatesPem: []string{"-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----\n"},
		ProxyMetadata:     map[string]string{"k": "v"}}
	b, err := proto.Marshal(pc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := TrustBundleFromProxyConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := pc.CaCertificatesPem[0] + "\n" + pc.CaCertificatesPem[1]; string(got) != want {
		t.Fatalf("bundle %q, want %q", got, want)
	}
	if _, err := TrustBundleFromProxyConfig([]byte{0x92, 0x02, 0x7f}); err == nil {
		t.Fatal("truncated field accepted")
	}
}

// FuzzTrustBundleFromProxyConfig: whenever protobuf accepts the bytes as a ProxyConfig, the
// bundle read from the wire is its ca_certificates_pem entries joined.
func FuzzTrustBundleFromProxyConfig(f *testing.F) {
	seed, _ := proto.Marshal(&meshconfig.ProxyConfig{CaCertificatesPem: []string{"a", "b\n", "c"}, ConfigPath: "x"})
	f.Add(seed)
	f.Add([]byte{0x92, 0x02, 0x01, 'z'})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := TrustBundleFromProxyConfig(b)
		var pc meshconfig.ProxyConfig
		if proto.Unmarshal(b, &pc) != nil {
			return
		}
		if err != nil {
			t.Fatalf("protobuf accepts %x, the trust bundle reader says %v", b, err)
		}
		var want []byte
		for _, c := range pc.CaCertificatesPem {
			if len(want) > 0 && want[len(want)-1] != '\n' {
				want = append(want, '\n')
			}
			want = append(want, c...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("bundle %q, want %q", got, want)
		}
	})
}
