package certs

import (
	"crypto"
	"testing"
)

// BenchmarkChainCheck is the agent's work on a CA answer before the secret is published:
// parsing the chain and checking it (SAN, key, validity, signatures up to the returned root).
func BenchmarkChainCheck(b *testing.B) {
	for _, kt := range []struct {
		name string
		kt   KeyType
	}{{"ecdsa", KeyECDSA}, {"rsa", KeyRSA}} {
		b.Run("key="+kt.name, func(b *testing.B) {
			e := newEnv(b, func(c *Config) { c.KeyType = kt.kt })
			c := e.dial()
			c.send("", ResourceDefault)
			c.mustRecv(ResourceDefault)
			w := e.m.cur.Load()
			elems := []string{string(w.chainPEM), string(w.rootPEM)}
			pub := w.cert.PrivateKey.(crypto.Signer).Public()
			now := e.clock.Now()
			b.Run("full", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					ch, err := ParseChain(elems)
					if err != nil {
						b.Fatal(err)
					}
					if err := ch.check(pub, e.m.spiffeID, now); err != nil {
						b.Fatal(err)
					}
				}
			})
			// cached: what a rotation does since chainCache (the root as the last answer's).
			b.Run("cached", func(b *testing.B) {
				var c chainCache
				b.ReportAllocs()
				for b.Loop() {
					ch, err := c.parse(elems)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.check(ch, pub, e.m.spiffeID, now); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
