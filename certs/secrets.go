package certs

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// Resource names Envoy asks for, as Istio's agent serves them.
const (
	ResourceDefault  = "default"
	ResourceRootCA   = "ROOTCA"
	fileCertPrefix   = "file-cert:"
	fileRootPrefix   = "file-root:"
	fileRootSystem   = "file-root:system"
	fileCertSplitter = "~"
)

func inline(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

// certSecret is a tls_certificate secret with the chain and key inline.
func certSecret(name string, chainPEM, keyPEM []byte) *tlsv3.Secret {
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(chainPEM),
		PrivateKey:       inline(keyPEM),
	}}}
}

// rootSecret is a validation_context secret trusting rootPEM.
func rootSecret(name string, rootPEM []byte) *tlsv3.Secret {
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: inline(rootPEM),
	}}}
}
