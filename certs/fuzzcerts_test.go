package certs

import (
	"crypto/ed25519"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// Fuzz inputs of CA responses name whole certificates with two bytes instead of carrying their
// PEM text. A fuzzer that found new coverage in a 1.4 KB PEM chain minimised it, trying Go's
// O(n^2) byte-subset removals (about a million runs), on both workers for the whole
// -fuzzminimizetime: a 30 s run made 8 to 66 executions (issue 22). With certificates named,
// inputs stay tens of bytes; the fuzzer still writes any bytes it likes (garbage, broken PEM,
// a corrupt DER block of its own), so the parser is fed everything it was before.
//
// In an element (elements are separated by NUL, as before), the byte 0xFF followed by a byte k
// stands for the PEM of fuzzCerts block (k-1) mod len(blocks) (k is never NUL, the separator);
// every other byte is itself.
const fuzzCertMark = 0xFF

// fuzzCerts are the certificates fuzz inputs name: testca's leaf and root (ECDSA, as Istio's CA
// issues; testdata/fuzz-chain.pem) and a root, an intermediate and two leaves under it (Ed25519:
// made here in microseconds, where signing with elliptic-curve keys under coverage
// instrumentation is slow), made once per fuzzing process.
type fuzzCerts struct{ blocks []string }

func newFuzzCerts(f testing.TB) fuzzCerts {
	chainPEM, err := os.ReadFile("testdata/fuzz-chain.pem")
	if err != nil {
		f.Fatal(err)
	}
	fc := fuzzCerts{blocks: strings.SplitAfter(string(chainPEM), "-----END CERTIFICATE-----\n")}
	fc.blocks = fc.blocks[:len(fc.blocks)-1] // what follows the last block
	if len(fc.blocks) != 2 {
		f.Fatalf("testdata/fuzz-chain.pem holds %d certificates, want 2", len(fc.blocks))
	}
	keys := make([]ed25519.PrivateKey, 4)
	for i := range keys {
		seed := make([]byte, ed25519.SeedSize)
		seed[0] = byte(i + 1)
		keys[i] = ed25519.NewKeyFromSeed(seed)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	issue := func(serial int64, tmpl, parent *x509.Certificate, pub ed25519.PublicKey, signer ed25519.PrivateKey) *x509.Certificate {
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now, now.Add(100*365*24*time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(nil, tmpl, parent, pub, signer)
		if err != nil {
			f.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			f.Fatal(err)
		}
		fc.blocks = append(fc.blocks, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
		return c
	}
	ca := func(name string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	id, _ := url.Parse(testID)
	leaf := func() *x509.Certificate {
		return &x509.Certificate{URIs: []*url.URL{id}, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature}
	}
	root := issue(1, ca("root"), nil, keys[0].Public().(ed25519.PublicKey), keys[0])
	inter := issue(2, ca("intermediate"), root, keys[1].Public().(ed25519.PublicKey), keys[0])
	issue(3, leaf(), inter, keys[2].Public().(ed25519.PublicKey), keys[1])
	issue(4, leaf(), inter, keys[3].Public().(ed25519.PublicKey), keys[1])
	return fc
}

// Block numbers in fuzzCerts.blocks.
const (
	fcTestcaLeaf = iota
	fcTestcaRoot
	fcRoot
	fcInter
	fcLeaf1
	fcLeaf2
)

// elems splits a fuzz input into CA response elements at NUL bytes and expands certificate names.
func (fc fuzzCerts) elems(in []byte) []string {
	parts := strings.Split(string(in), "\x00")
	for i, p := range parts {
		if strings.IndexByte(p, fuzzCertMark) < 0 {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			if p[j] == fuzzCertMark && j+1 < len(p) {
				b.WriteString(fc.blocks[(int(p[j+1])-1)%len(fc.blocks)])
				j++
				continue
			}
			b.WriteByte(p[j])
		}
		parts[i] = b.String()
	}
	return parts
}

// name is the two bytes that stand for block k, for seeds.
func name(k int) string { return string([]byte{fuzzCertMark, byte(k + 1)}) }

// TestFuzzCertsElems: the expansion the fuzz targets rely on.
func TestFuzzCertsElems(t *testing.T) {
	fc := fuzzCerts{blocks: []string{"A", "B"}}
	for in, want := range map[string][]string{
		"":       {""},
		"x\x00y": {"x", "y"},
		name(0) + "-" + name(1) + "\x00" + name(3): {"A-B", "B"},
		"tail\xff": {"tail\xff"},
		"\xff\xff": {"A"}, // 0xFF names block 254 mod 2
	} {
		got := fc.elems([]byte(in))
		if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("elems(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFuzzCertsChains: the named certificates make the chains the seeds mean: testca's pair,
// and two three-certificate chains sharing their upper part, the second parsed from the cache.
func TestFuzzCertsChains(t *testing.T) {
	fc := newFuzzCerts(t)
	if ch, err := ParseChain(fc.elems([]byte(name(fcTestcaLeaf) + "\x00" + name(fcTestcaRoot)))); err != nil || len(ch.Intermediates) != 0 {
		t.Fatalf("testca pair: %v", err)
	}
	var c chainCache
	first, err := c.parse(fc.elems([]byte(name(fcLeaf1) + "\x00" + name(fcInter) + "\x00" + name(fcRoot))))
	if err != nil || len(first.Intermediates) != 1 {
		t.Fatalf("Ed25519 chain: %v", err)
	}
	second, err := c.parse(fc.elems([]byte(name(fcLeaf2) + "\x00" + name(fcInter) + "\x00" + name(fcRoot))))
	if err != nil || second.upper == nil || second.upper != first.upper || second.Leaf.Equal(first.Leaf) {
		t.Fatalf("second leaf under the same intermediate: %v, not from the cache", err)
	}
}
