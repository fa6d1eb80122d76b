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
	"net/url"
	"strings"
	"testing"
	"time"
)

// pki issues test certificates: a root, an intermediate under it, leaves under the intermediate.
type pki struct {
	t      *testing.T
	now    time.Time
	serial int64
}

func (p *pki) key() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	return k
}

// issue signs tmpl for pub with parent/signer (self-signed when parent is nil) and returns it
// parsed and as PEM.
func (p *pki) issue(tmpl, parent *x509.Certificate, pub any, signer *ecdsa.PrivateKey) (*x509.Certificate, string) {
	p.t.Helper()
	p.serial++
	tmpl.SerialNumber = big.NewInt(p.serial)
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = p.now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = p.now.Add(24 * time.Hour)
	}
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		p.t.Fatal(err)
	}
	return c, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func caTmpl(name string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
}

func (p *pki) leaf(parent *x509.Certificate, signer *ecdsa.PrivateKey) (*ecdsa.PrivateKey, string) {
	k := p.key()
	u, _ := url.Parse(testID)
	_, s := p.issue(&x509.Certificate{URIs: []*url.URL{u}, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature}, parent, k.Public(), signer)
	return k, s
}

// TestChainCacheWithIntermediate: a second answer with the same intermediate and root parses only
// the leaf and checks it under the verified issuer, with the verdicts of the full check: good
// leaves pass, a leaf forged under the issuer's name and certificates out of their validity fail.
func TestChainCacheWithIntermediate(t *testing.T) {
	p := &pki{t: t, now: time.Now()}
	rootKey, interKey := p.key(), p.key()
	root, rootPEM := p.issue(caTmpl("root"), nil, rootKey.Public(), rootKey)
	inter, interPEM := p.issue(caTmpl("intermediate"), root, interKey.Public(), rootKey)

	var c chainCache
	k1, l1 := p.leaf(inter, interKey)
	ch1, err := c.parse([]string{l1, interPEM, rootPEM})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.check(ch1, k1.Public(), testID, p.now); err != nil {
		t.Fatal(err)
	}
	u := ch1.upper
	if u == nil || u.anchor == nil {
		t.Fatal("the verified intermediate is not kept as the anchor")
	}
	k2, l2 := p.leaf(inter, interKey)
	elems := []string{l2, interPEM, rootPEM}
	ch2, err := c.parse(elems)
	if err != nil {
		t.Fatal(err)
	}
	if ch2.upper != u {
		t.Fatal("the same intermediate and root were parsed again")
	}
	if err := c.check(ch2, k2.Public(), testID, p.now); err != nil {
		t.Fatal(err)
	}
	full, err := ParseChain(elems)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(full.ChainPEM, ch2.ChainPEM) || !bytes.Equal(full.RootPEM, ch2.RootPEM) {
		t.Fatal("the cached parse serves other bytes than a full parse")
	}

	// An impostor: the intermediate's name, another key.
	fakeKey := p.key()
	fake := *inter
	fake.PublicKey = fakeKey.Public()
	k3, l3 := p.leaf(&fake, fakeKey)
	ch3, err := c.parse([]string{l3, interPEM, rootPEM})
	if err != nil {
		t.Fatal(err)
	}
	if ch3.upper != u {
		t.Fatal("cache not used for the forged leaf")
	}
	if err := c.check(ch3, k3.Public(), testID, p.now); err == nil || !strings.Contains(err.Error(), "does not chain") {
		t.Fatalf("forged leaf: %v", err)
	}
	if err := full.check(k2.Public(), testID, p.now.Add(48*time.Hour)); err == nil {
		t.Fatal("the full check accepts an expired leaf")
	}

	// Validity above the leaf: an intermediate and a root that expire before the leaf does.
	for _, tc := range []struct {
		name            string
		rootTo, interTo time.Duration
	}{{"intermediate expired", 24 * time.Hour, time.Hour}, {"root expired", time.Hour, 24 * time.Hour}} {
		rk, ik := p.key(), p.key()
		rt := caTmpl("root " + tc.name)
		rt.NotAfter = p.now.Add(tc.rootTo)
		r, rPEM := p.issue(rt, nil, rk.Public(), rk)
		it := caTmpl("intermediate " + tc.name)
		it.NotAfter = p.now.Add(tc.interTo)
		in, iPEM := p.issue(it, r, ik.Public(), rk)
		lt := &x509.Certificate{URIs: ch1.Leaf.URIs, NotAfter: p.now.Add(48 * time.Hour)}
		var cc chainCache
		for i, at := range []time.Time{p.now, p.now.Add(2 * time.Hour)} {
			k := p.key()
			_, l := p.issue(lt, in, k.Public(), ik)
			ch, err := cc.parse([]string{l, iPEM, rPEM})
			if err != nil {
				t.Fatal(err)
			}
			if i == 1 && ch.upper == nil {
				t.Fatalf("%s: cache not used", tc.name)
			}
			got := cc.check(ch, k.Public(), testID, at)
			want := ch.check(k.Public(), testID, at)
			if (got == nil) != (want == nil) || (i == 0) != (got == nil) {
				t.Errorf("%s at +%v: cached check %v, full check %v", tc.name, at.Sub(p.now), got, want)
			}
		}
	}
}

// TestChainCacheNameConstraintsAbove: a root whose name constraints exclude the leaf's identity is
// not dropped from the leaf's check: the shortcut is off and the leaf is refused.
func TestChainCacheNameConstraintsAbove(t *testing.T) {
	p := &pki{t: t, now: time.Now()}
	rootKey, interKey := p.key(), p.key()
	rt := caTmpl("constrained root")
	rt.PermittedURIDomains = []string{"example.org"}
	root, rootPEM := p.issue(rt, nil, rootKey.Public(), rootKey)
	inter, interPEM := p.issue(caTmpl("intermediate"), root, interKey.Public(), rootKey)
	var c chainCache
	for range 2 {
		k, l := p.leaf(inter, interKey)
		ch, err := c.parse([]string{l, interPEM, rootPEM})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.check(ch, k.Public(), testID, p.now); err == nil {
			t.Fatal("a leaf outside the root's name constraints was accepted")
		}
		if ch.upper.anchor != nil {
			t.Fatal("the issuer became the anchor under a name-constrained root")
		}
	}
}

// TestChainCacheSingleElement: a leaf sharing its element with the rest is parsed in full each time.
func TestChainCacheSingleElement(t *testing.T) {
	p := &pki{t: t, now: time.Now()}
	rootKey := p.key()
	root, rootPEM := p.issue(caTmpl("root"), nil, rootKey.Public(), rootKey)
	var c chainCache
	for range 2 {
		k, l := p.leaf(root, rootKey)
		ch, err := c.parse([]string{l + rootPEM})
		if err != nil {
			t.Fatal(err)
		}
		if ch.upper != nil {
			t.Fatal("a one-element answer was cached")
		}
		if err := c.check(ch, k.Public(), testID, p.now); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzChainCacheParse: whatever two answers arrive in turn (elements separated by NUL;
// certificates named as fuzzcerts_test.go says), the second parsed through the cache equals a
// full parse of it, and fails exactly when that fails.
func FuzzChainCacheParse(f *testing.F) {
	fc := newFuzzCerts(f)
	pair := name(fcTestcaLeaf) + "\x00" + name(fcTestcaRoot)
	f.Add([]byte(pair), []byte(pair))
	f.Add([]byte(pair), []byte("garbage\x00"+name(fcTestcaRoot)))
	f.Add([]byte(pair), []byte(name(fcTestcaRoot)+"\x00"+name(fcTestcaRoot)))
	f.Add([]byte(name(fcTestcaLeaf)+name(fcTestcaRoot)), []byte(pair))
	three := func(leaf int) string { return name(leaf) + "\x00" + name(fcInter) + "\x00" + name(fcRoot) }
	f.Add([]byte(three(fcLeaf1)), []byte(three(fcLeaf2)))
	f.Add([]byte(three(fcLeaf1)), []byte(name(fcLeaf2)+name(fcLeaf1)+"\x00"+name(fcInter)+"\x00"+name(fcRoot)))
	f.Add([]byte(three(fcLeaf1)), []byte(three(fcTestcaLeaf)))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		var c chainCache
		_, _ = c.parse(fc.elems(first))
		elems := fc.elems(second)
		got, err := c.parse(elems)
		want, wantErr := ParseChain(elems)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("cached parse error %v, full parse error %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if !got.Leaf.Equal(want.Leaf) || !got.Root.Equal(want.Root) || len(got.Intermediates) != len(want.Intermediates) ||
			!bytes.Equal(got.ChainPEM, want.ChainPEM) || !bytes.Equal(got.RootPEM, want.RootPEM) {
			t.Fatal("the cached parse differs from a full parse")
		}
	})
}
