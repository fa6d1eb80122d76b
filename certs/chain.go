package certs

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Chain is a parsed CA response: leaf first, root last. Immutable.
type Chain struct {
	Leaf          *x509.Certificate
	Intermediates []*x509.Certificate
	Root          *x509.Certificate
	ChainPEM      []byte // every certificate but the root, leaf first, as served in "default"
	RootPEM       []byte // the root, as served in "ROOTCA"

	upper *upperChain // set by chainCache: the intermediates and root, shared across rotations
}

// ErrShortChain is returned for a response of fewer than two certificates (Istio's rule).
var ErrShortChain = errors.New("certificate chain has fewer than two certificates")

// ParseChain parses a CA response's cert_chain: each element holds one or more PEM
// certificates; the first is the leaf, the last the root. Nothing else is checked here.
func ParseChain(elems []string) (*Chain, error) {
	ch, _, err := parseChain(elems)
	return ch, err
}

// parseChain is ParseChain, also returning how many certificates the first element held.
func parseChain(elems []string) (*Chain, int, error) {
	var certs []*x509.Certificate
	var ders [][]byte
	n0 := 0
	for i, e := range elems {
		c, d, err := parseElement(i, e)
		if err != nil {
			return nil, 0, err
		}
		if i == 0 {
			n0 = len(c)
		}
		certs = append(certs, c...)
		ders = append(ders, d...)
	}
	if len(certs) < 2 {
		return nil, 0, fmt.Errorf("%w (got %d)", ErrShortChain, len(certs))
	}
	ch := &Chain{Leaf: certs[0], Intermediates: certs[1 : len(certs)-1], Root: certs[len(certs)-1]}
	var buf bytes.Buffer
	for _, der := range ders[:len(ders)-1] {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	ch.ChainPEM = buf.Bytes()
	ch.RootPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ders[len(ders)-1]})
	return ch, n0, nil
}

// parseElement parses the PEM certificates of element i of a CA response: at least one, nothing
// but blanks after the last.
func parseElement(i int, e string) ([]*x509.Certificate, [][]byte, error) {
	var certs []*x509.Certificate
	var ders [][]byte
	rest := []byte(e)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, nil, fmt.Errorf("chain element %d: PEM block %q is not a CERTIFICATE", i, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("chain element %d: %w", i, err)
		}
		certs = append(certs, c)
		ders = append(ders, block.Bytes)
	}
	if len(certs) == 0 {
		return nil, nil, fmt.Errorf("chain element %d: no PEM certificate in %d bytes", i, len(e))
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, nil, fmt.Errorf("chain element %d: %d trailing bytes after the last certificate", i, len(rest))
	}
	return certs, ders, nil
}

// check verifies that the chain is usable for our key and identity at now: the leaf names
// spiffeID, holds pub, is not expired, and chains to the root through the intermediates.
func (ch *Chain) check(pub crypto.PublicKey, spiffeID string, now time.Time) error {
	at, err := ch.checkLeaf(pub, spiffeID, now)
	if err != nil {
		return err
	}
	roots, inter := ch.pools()
	return ch.verifyUnder(roots, inter, at)
}

// checkLeaf checks the leaf's SAN, key and expiry, and returns the time to verify the chain at:
// now, or the leaf's start when the CA's clock runs ahead of ours.
func (ch *Chain) checkLeaf(pub crypto.PublicKey, spiffeID string, now time.Time) (time.Time, error) {
	leaf := ch.Leaf
	found := false
	for _, u := range leaf.URIs {
		if u.String() == spiffeID {
			found = true
			break
		}
	}
	if !found {
		return now, fmt.Errorf("leaf SANs %v do not name %s", leaf.URIs, spiffeID)
	}
	if k, ok := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !k.Equal(leaf.PublicKey) {
		return now, errors.New("leaf public key does not match the CSR's key")
	}
	if !now.Before(leaf.NotAfter) {
		return now, fmt.Errorf("leaf expired at %s (now %s)", leaf.NotAfter.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return leaf.NotBefore, nil
	}
	return now, nil
}

// pools are the chain's root and intermediates as x509 pools.
func (ch *Chain) pools() (roots, inter *x509.CertPool) {
	roots = x509.NewCertPool()
	roots.AddCert(ch.Root)
	inter = x509.NewCertPool()
	for _, c := range ch.Intermediates {
		inter.AddCert(c)
	}
	return roots, inter
}

// verifyUnder verifies the leaf's chain to roots through inter (nil: none) at at.
func (ch *Chain) verifyUnder(roots, inter *x509.CertPool, at time.Time) error {
	_, err := ch.Leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Errorf("leaf does not chain to the returned root: %w", err)
	}
	return nil
}
