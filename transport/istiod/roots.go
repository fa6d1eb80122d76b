package istiod

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
)

// rootPool caches the roots from a PEM file, reloading it when its content changes.
type rootPool struct {
	file string // immutable; "" means the system roots

	mu   sync.Mutex // guards the fields below
	raw  []byte
	pool *x509.CertPool
}

func (r *rootPool) get() (*x509.CertPool, error) {
	if r.file == "" {
		return x509.SystemCertPool()
	}
	b, err := os.ReadFile(r.file)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.pool != nil {
			return r.pool, nil // keep the last good roots while the file is being replaced
		}
		return nil, fmt.Errorf("istiod: read root CA %s: %w", r.file, err)
	}
	if r.pool != nil && bytes.Equal(b, r.raw) {
		return r.pool, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		if r.pool != nil {
			return r.pool, nil
		}
		return nil, fmt.Errorf("istiod: root CA %s holds no PEM certificate", r.file)
	}
	r.raw, r.pool = b, pool
	return pool, nil
}

func (r *rootPool) verify(serverName string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("istiod: the server presented no certificate")
		}
		pool, err := r.get()
		if err != nil {
			return err
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: serverName, Roots: pool, Intermediates: inter})
		if err != nil {
			return fmt.Errorf("istiod: verify the server certificate for %q: %w", serverName, err)
		}
		return nil
	}
}
