package certs

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"time"
)

// chainCache keeps what a CA answer repeats at every rotation: the certificates above the leaf
// (intermediates and root), parsed and PEM-encoded once, and their chain verified once. A rotation
// whose answer carries the same bytes above the leaf then parses only the leaf and checks one
// signature: the leaf's, by its issuer. Owned by the rotator goroutine.
//
// The chain is still verified in full before anything is served: the leaf's signature is checked
// on the path, never after the push. Istio's agent checks nothing; we do because the cheap checks
// (our key, our SAN, the issuer's name) do not show that the CA signed the leaf, and a certificate
// its peers reject would break every mTLS connection of the workload until the next rotation,
// where keeping the old, still valid certificate breaks nothing.
type chainCache struct {
	upper *upperChain // the part above the leaf of the last answer parsed; nil before the first
}

// upperChain is the part of a CA answer above the leaf. Fields set at parse are immutable; the
// pools and the verdict are filled by the first check, on the rotator goroutine.
type upperChain struct {
	elems    []string // the answer's elements after the first, as received
	inter    []*x509.Certificate
	root     *x509.Certificate
	interPEM []byte // the intermediates as served in "default" after the leaf
	rootPEM  []byte

	roots, inters *x509.CertPool // for a full verification; nil until the first check
	// anchor holds the leaf's issuer alone once the issuer is verified to chain to the root and
	// verifying a leaf under it is equivalent to the full verification (see prepare); nil when
	// not (yet): each leaf is then verified through the whole chain.
	anchor   *x509.CertPool
	prepared bool // prepare ran and succeeded
}

// parse parses a CA answer; when the elements after the first are those of the last answer and
// the first holds only the leaf, only the leaf is parsed.
func (c *chainCache) parse(elems []string) (*Chain, error) {
	if u := c.upper; u != nil && len(elems) == len(u.elems)+1 && slices.Equal(elems[1:], u.elems) {
		certs, ders, err := parseElement(0, elems[0])
		if err != nil {
			return nil, err
		}
		if len(certs) == 1 {
			chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ders[0]})
			if len(u.interPEM) > 0 {
				chain = append(chain[:len(chain):len(chain)], u.interPEM...)
			}
			return &Chain{Leaf: certs[0], Intermediates: u.inter, Root: u.root, ChainPEM: chain,
				RootPEM: u.rootPEM, upper: u}, nil
		}
	}
	ch, n0, err := parseChain(elems)
	if err != nil {
		return nil, err
	}
	if n0 != 1 {
		c.upper = nil // the leaf shares its element with other certificates: nothing to reuse
		return ch, nil
	}
	leafPEM := len(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ch.Leaf.Raw}))
	u := &upperChain{elems: slices.Clone(elems[1:]), inter: ch.Intermediates, root: ch.Root,
		interPEM: slices.Clone(ch.ChainPEM[leafPEM:]), rootPEM: ch.RootPEM}
	c.upper, ch.upper = u, u
	return ch, nil
}

// check is Chain.check, reusing the verified part above the leaf when ch came from parse.
func (c *chainCache) check(ch *Chain, pub crypto.PublicKey, spiffeID string, now time.Time) error {
	u := ch.upper
	if u == nil {
		return ch.check(pub, spiffeID, now)
	}
	at, err := ch.checkLeaf(pub, spiffeID, now)
	if err != nil {
		return err
	}
	if u.roots == nil {
		u.roots, u.inters = ch.pools()
	}
	if !u.prepared {
		if err := u.prepare(at); err != nil {
			return err
		}
	}
	if u.anchor == nil {
		return ch.verifyUnder(u.roots, u.inters, at)
	}
	// Under the anchor, x509 checks the leaf's signature by its issuer, the issuer's authority to
	// sign, both validity periods and the issuer's name constraints; what lies above the issuer
	// was verified once, and only its validity periods depend on at.
	for _, c := range u.above() {
		if at.Before(c.NotBefore) || at.After(c.NotAfter) {
			return fmt.Errorf("leaf does not chain to the returned root: %q is valid from %s to %s, not at %s",
				c.Subject, c.NotBefore.Format(time.RFC3339), c.NotAfter.Format(time.RFC3339), at.Format(time.RFC3339))
		}
	}
	return ch.verifyUnder(u.anchor, nil, at)
}

// prepare verifies, once, that the leaf's issuer (the first intermediate) chains to the root, and
// sets anchor when verifying a leaf under the issuer alone is then the same as the full check:
// when nothing above the issuer carries name constraints (x509 applies those of every CA in the
// chain to the leaf) and no certificate of the chain carries certificate-policy extensions (x509
// processes policies along the whole path). Path lengths above the issuer do not depend on the
// leaf. Without intermediates the root is the issuer and the full check is already one signature.
func (u *upperChain) prepare(at time.Time) error {
	if len(u.inter) == 0 {
		u.anchor, u.prepared = u.roots, true
		return nil
	}
	issuer, above := u.inter[0], u.above()
	for _, c := range append([]*x509.Certificate{issuer}, above...) {
		if hasPolicies(c) {
			u.prepared = true // every leaf takes the full check
			return nil
		}
	}
	for _, c := range above {
		if hasNameConstraints(c) {
			u.prepared = true
			return nil
		}
	}
	inters := x509.NewCertPool()
	for _, c := range u.inter[1:] {
		inters.AddCert(c)
	}
	if _, err := issuer.Verify(x509.VerifyOptions{Roots: u.roots, Intermediates: inters, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("leaf does not chain to the returned root: its issuer %q: %w", issuer.Subject, err)
	}
	u.anchor = x509.NewCertPool()
	u.anchor.AddCert(issuer)
	u.prepared = true
	return nil
}

// above is what lies above the leaf's issuer: the other intermediates and the root; nothing when
// the root issued the leaf.
func (u *upperChain) above() []*x509.Certificate {
	if len(u.inter) == 0 {
		return nil
	}
	return append(slices.Clone(u.inter[1:]), u.root)
}

func hasNameConstraints(c *x509.Certificate) bool {
	return len(c.PermittedDNSDomains)+len(c.ExcludedDNSDomains)+len(c.PermittedIPRanges)+
		len(c.ExcludedIPRanges)+len(c.PermittedEmailAddresses)+len(c.ExcludedEmailAddresses)+
		len(c.PermittedURIDomains)+len(c.ExcludedURIDomains) > 0 || c.PermittedDNSDomainsCritical
}

func hasPolicies(c *x509.Certificate) bool {
	return len(c.Policies)+len(c.PolicyIdentifiers)+len(c.PolicyMappings) > 0 ||
		c.RequireExplicitPolicy > 0 || c.RequireExplicitPolicyZero ||
		c.InhibitPolicyMapping > 0 || c.InhibitPolicyMappingZero ||
		c.InhibitAnyPolicy > 0 || c.InhibitAnyPolicyZero
}
