package certs

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
)

// DefaultCRLPath is where Istio mounts a plugged-in CA's certificate revocation list
// (security.CACRLFilePath in Istio, relative to the agent's working directory "/").
const DefaultCRLPath = "./var/run/secrets/istio/crl/ca-crl.pem"

// rootExtras is what validation-context secrets carry besides their roots: the trust bundle
// received over PCDS (merged into ROOTCA, as Istio's UpdateConfigTrustBundle does) and, with
// PILOT_ENABLE_CA_CRL, the CA's CRL (in ROOTCA and every file-root: secret, as Istio's SDS server
// adds it). crlPath is immutable; bundle and crl are guarded by mu.
type rootExtras struct {
	crlPath string

	mu     sync.Mutex
	bundle []byte // PEM certificates from ProxyConfig.ca_certificates_pem; nil when none
	crl    []byte // the CRL file's content; nil when the file is absent
}

func (x *rootExtras) snapshot() (bundle, crl []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.bundle, x.crl
}

// setBundle records a new trust bundle and reports whether it changed.
func (x *rootExtras) setBundle(b []byte) bool {
	if len(b) == 0 {
		b = nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if bytes.Equal(x.bundle, b) {
		return false
	}
	x.bundle = b
	return true
}

// reloadCRL re-reads the CRL file (absent is not an error: no CRL is served) and reports
// whether what is served changed.
func (x *rootExtras) reloadCRL() (bool, error) {
	if x.crlPath == "" {
		return false, nil
	}
	b, err := os.ReadFile(x.crlPath)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = nil, nil
	}
	if err != nil {
		return false, fmt.Errorf("CRL %s: %w", x.crlPath, err)
	}
	if b != nil && !bytes.Contains(b, []byte("-----BEGIN X509 CRL-----")) {
		return false, fmt.Errorf("CRL %s: no PEM X509 CRL block", x.crlPath)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if bytes.Equal(x.crl, b) {
		return false, nil
	}
	x.crl = b
	return true, nil
}

// crlDir is the directory to watch for CRL changes, or "" when there is none to watch.
func (x *rootExtras) crlDir() string {
	if x.crlPath == "" {
		return ""
	}
	d := filepath.Dir(x.crlPath)
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		return ""
	}
	return d
}

// rootCASecret is the ROOTCA secret for root: merged with the PCDS trust bundle when there is one,
// with the CRL when there is one.
func (x *rootExtras) rootCASecret(root []byte) secret {
	bundle, crl := x.snapshot()
	if bundle != nil {
		root = mergeRoots(root, bundle)
	}
	return rootSecret(ResourceRootCA, root, crl)
}

// mergeRoots is Istio's trust-anchor merge: the set of PEM certificates of both, each re-encoded,
// de-duplicated and sorted, one after another.
func mergeRoots(a, b []byte) []byte {
	var certs []string
	for _, in := range [][]byte{a, b} {
		for {
			var block *pem.Block
			block, in = pem.Decode(in)
			if block == nil {
				break
			}
			if block.Type == "CERTIFICATE" {
				certs = append(certs, string(pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes})))
			}
		}
	}
	slices.Sort(certs)
	certs = slices.Compact(certs)
	var out []byte
	for _, c := range certs {
		out = append(out, c...)
	}
	return out
}

// proxyConfigCACerts is istio.mesh.v1alpha1.ProxyConfig.ca_certificates_pem.
const proxyConfigCACerts = 34

// TrustBundleFromProxyConfig reads the trust bundle a PCDS ProxyConfig resource carries: its
// ca_certificates_pem entries joined, each on its own lines (Istio's agent does the same before
// UpdateConfigTrustBundle). Only that field is read; the rest of the message is skipped.
func TrustBundleFromProxyConfig(pc []byte) ([]byte, error) {
	var out []byte
	for len(pc) > 0 {
		num, typ, n := protowire.ConsumeTag(pc)
		if n < 0 {
			return nil, fmt.Errorf("ProxyConfig: %w", protowire.ParseError(n))
		}
		pc = pc[n:]
		if num == proxyConfigCACerts && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(pc)
			if n < 0 {
				return nil, fmt.Errorf("ProxyConfig.ca_certificates_pem: %w", protowire.ParseError(n))
			}
			if len(out) > 0 && out[len(out)-1] != '\n' {
				out = append(out, '\n')
			}
			out = append(out, v...)
			pc = pc[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, pc)
		if n < 0 {
			return nil, fmt.Errorf("ProxyConfig field %d: %w", num, protowire.ParseError(n))
		}
		pc = pc[n:]
	}
	return out, nil
}

// UpdateTrustBundle installs the trust bundle received over PCDS (PROXY_CONFIG_XDS_AGENT): ROOTCA
// is pushed again with the bundle's certificates merged into the mesh root. An empty bundle
// removes them. A bundle without a valid certificate is refused.
func (m *Manager) UpdateTrustBundle(bundle []byte) error {
	if len(bundle) > 0 {
		if _, err := validRoots(bundle); err != nil {
			return fmt.Errorf("PCDS trust bundle: %w", err)
		}
	}
	if !m.extras.setBundle(bundle) {
		return nil
	}
	m.log.Info("PCDS trust bundle updated", "bytes", len(bundle))
	m.republishRoots()
	return nil
}

// republishRoots pushes ROOTCA (from the CA or the mounted files) and every file-root: secret
// again, after the trust bundle or the CRL changed.
func (m *Manager) republishRoots() {
	m.publishCARoot()
	_ = m.files.reloadAll()
}

// publishCARoot pushes ROOTCA again when it comes from the CA (file-mounted roots are the file
// watcher's).
func (m *Manager) publishCARoot() {
	m.aliasMu.Lock()
	defer m.aliasMu.Unlock()
	if w := m.cur.Load(); w != nil && w.rootPEM != nil {
		m.store.publish(m.extras.rootCASecret(w.rootPEM))
	}
}
