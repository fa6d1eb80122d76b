package istiod

import (
	"crypto/tls"
	"time"
)

// FileClientCertificate presents the key pair in certFile and keyFile, read at every handshake so
// a rotated pair is used at once (PROV_CERT, and FILE_MOUNTED_CERTS' ISTIO_META_TLS_CLIENT_*). As
// Istio's agent does, a pair that is missing, unreadable or expired at now() is replaced by no
// certificate (the call then relies on the token alone).
func FileClientCertificate(certFile, keyFile string, now func() time.Time) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil || kp.Leaf == nil || now().After(kp.Leaf.NotAfter) {
			return &tls.Certificate{}, nil
		}
		return &kp, nil
	}
}
