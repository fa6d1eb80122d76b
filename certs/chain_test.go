package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	pb "istio.io/api/security/v1alpha1"

	"github.com/wingman-mesh/wingman/lab/testca"
)

const testID = "spiffe://cluster.local/ns/default/sa/sleep"

// signedChain has the test CA sign a fresh key's CSR (no network: a direct call).
func signedChain(t testing.TB, ca *testca.CA) (*ecdsa.PrivateKey, []string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := createCSR(key, testID)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ca.CreateCertificate(context.Background(), &pb.IstioCertificateRequest{Csr: string(csr)})
	if err != nil {
		t.Fatal(err)
	}
	return key, resp.GetCertChain()
}

func TestParseChain(t *testing.T) {
	ca, err := testca.New(testca.Config{})
	if err != nil {
		t.Fatal(err)
	}
	key, elems := signedChain(t, ca)
	ch, err := ParseChain(elems)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.check(key.Public(), testID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ch.RootPEM, ca.RootPEM()) || !bytes.Equal(ch.ChainPEM, []byte(elems[0])) {
		t.Error("ChainPEM/RootPEM do not reproduce the response")
	}
	// Leaf and root in one element parse the same.
	if _, err := ParseChain([]string{elems[0] + elems[1]}); err != nil {
		t.Errorf("single concatenated element: %v", err)
	}
	for _, tc := range []struct {
		elems []string
		want  string
	}{
		{nil, "fewer than two"},
		{elems[:1], "fewer than two"},
		{[]string{"garbage", elems[1]}, "element 0: no PEM certificate"},
		{[]string{elems[0], elems[1] + "trailing"}, "trailing bytes"},
		{[]string{string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}})), elems[1]}, "element 0"},
		{[]string{string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})), elems[1]}, "not a CERTIFICATE"},
	} {
		if _, err := ParseChain(tc.elems); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseChain(%.40q): %v, want %q", tc.elems, err, tc.want)
		}
	}
	if _, err := ParseChain(elems[:1]); !errors.Is(err, ErrShortChain) {
		t.Errorf("one element: %v is not ErrShortChain", err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err := ch.check(other.Public(), testID, time.Now()); err == nil {
		t.Error("foreign key accepted")
	}
	if err := ch.check(key.Public(), "spiffe://x/ns/a/sa/b", time.Now()); err == nil {
		t.Error("foreign identity accepted")
	}
	if err := ch.check(key.Public(), testID, time.Now().Add(25*time.Hour)); err == nil {
		t.Error("expired leaf accepted")
	}
}

// FuzzParseChain feeds arbitrary CA responses (elements separated by NUL; certificates named
// as fuzzcerts_test.go says) to ParseChain and checks that a parsed chain re-encodes to the same
// certificates.
func FuzzParseChain(f *testing.F) {
	fc := newFuzzCerts(f)
	f.Add([]byte(name(fcTestcaLeaf) + "\x00" + name(fcTestcaRoot)))
	f.Add([]byte(name(fcLeaf1) + "\x00" + name(fcInter) + "\x00" + name(fcRoot)))
	f.Add([]byte(name(fcLeaf2) + name(fcInter) + "\x00" + name(fcRoot) + "\n"))
	f.Add([]byte("garbage\x00-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		ch, err := ParseChain(fc.elems(in))
		if err != nil {
			return
		}
		if ch.Leaf == nil || ch.Root == nil {
			t.Fatal("parsed chain without leaf or root")
		}
		again, err := ParseChain([]string{string(ch.ChainPEM), string(ch.RootPEM)})
		if err != nil {
			t.Fatalf("re-parsing the encoded chain: %v", err)
		}
		if !again.Leaf.Equal(ch.Leaf) || !again.Root.Equal(ch.Root) || len(again.Intermediates) != len(ch.Intermediates) {
			t.Fatal("re-encoded chain differs")
		}
	})
}
