package certs

import (
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/wingman-mesh/wingman/fastpath"
)

// The SDS server writes its Secrets in protobuf wire format directly: they are small, and encoding
// them by hand keeps go-control-plane's generated types (and the Envoy config closure they pull
// in) out of the agent. The DiscoveryRequests it reads and the DiscoveryResponses around the
// Secrets are fastpath's. Field numbers are those of Envoy's protos; sds_wire_test.go checks every
// encoding byte for byte against go-control-plane's marshalling.
const (
	secretName              = 1 // extensions.transport_sockets.tls.v3.Secret.name
	secretTLSCertificate    = 2 //   .tls_certificate
	secretValidationContext = 4 //   .validation_context
	tlsCertChain            = 1 // TlsCertificate.certificate_chain
	tlsPrivateKey           = 2 // TlsCertificate.private_key
	validationTrustedCA     = 1 // CertificateValidationContext.trusted_ca
	validationCRL           = 7 //   .crl
	dataSourceInlineBytes   = 2 // config.core.v3.DataSource.inline_bytes
)

// secret is an encoded tls.v3.Secret and its name.
type secret struct {
	name string
	body []byte
}

// appendMessage appends a length-delimited field whose value is built by body.
func appendMessage(dst []byte, field protowire.Number, n int, body func([]byte) []byte) []byte {
	dst = protowire.AppendTag(dst, field, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(n))
	return body(dst)
}

// inlineSize is the size of a DataSource{inline_bytes: b} field body.
func inlineSize(b []byte) int {
	return protowire.SizeTag(dataSourceInlineBytes) + protowire.SizeBytes(len(b))
}

// appendInline appends field as a DataSource holding b inline (a oneof member: written even when
// empty, as proto.Marshal does).
func appendInline(dst []byte, field protowire.Number, b []byte) []byte {
	return appendMessage(dst, field, inlineSize(b), func(dst []byte) []byte {
		dst = protowire.AppendTag(dst, dataSourceInlineBytes, protowire.BytesType)
		return protowire.AppendBytes(dst, b)
	})
}

func fieldSize(field protowire.Number, n int) int {
	return protowire.SizeTag(field) + protowire.SizeBytes(n)
}

func nameSize(name string) int {
	if name == "" {
		return 0
	}
	return fieldSize(secretName, len(name))
}

func appendName(dst []byte, name string) []byte {
	if name == "" {
		return dst
	}
	dst = protowire.AppendTag(dst, secretName, protowire.BytesType)
	return protowire.AppendString(dst, name)
}

// certSecret is a tls_certificate secret with the chain and key inline.
func certSecret(name string, chainPEM, keyPEM []byte) secret {
	inner := fieldSize(tlsCertChain, inlineSize(chainPEM)) + fieldSize(tlsPrivateKey, inlineSize(keyPEM))
	b := make([]byte, 0, nameSize(name)+fieldSize(secretTLSCertificate, inner))
	b = appendName(b, name)
	b = appendMessage(b, secretTLSCertificate, inner, func(dst []byte) []byte {
		dst = appendInline(dst, tlsCertChain, chainPEM)
		return appendInline(dst, tlsPrivateKey, keyPEM)
	})
	return secret{name: name, body: b}
}

// rootSecret is a validation_context secret trusting rootPEM, with the CRL crl when not nil.
func rootSecret(name string, rootPEM, crl []byte) secret {
	inner := fieldSize(validationTrustedCA, inlineSize(rootPEM))
	if crl != nil {
		inner += fieldSize(validationCRL, inlineSize(crl))
	}
	b := make([]byte, 0, nameSize(name)+fieldSize(secretValidationContext, inner))
	b = appendName(b, name)
	b = appendMessage(b, secretValidationContext, inner, func(dst []byte) []byte {
		dst = appendInline(dst, validationTrustedCA, rootPEM)
		if crl != nil {
			dst = appendInline(dst, validationCRL, crl)
		}
		return dst
	})
	return secret{name: name, body: b}
}

// resourceField encodes body as DiscoveryResponse.resources entry: the field tag and length, then
// a google.protobuf.Any of the Secret type. Built once per secret version, shared by all streams.
func resourceField(body []byte) []byte {
	b := make([]byte, 0, fastpath.ResourceSize(fastpath.SecretType, len(body)))
	return fastpath.AppendResource(b, fastpath.SecretType, body)
}

// encodeResponse encodes a DiscoveryResponse of Secrets: version_info is now (RFC 3339, UTC) + "/"
// + id, the nonce is id; resources are resourceField encodings, in order. One allocation.
func encodeResponse(now time.Time, id string, resources [][]byte) []byte {
	var vb [96]byte
	v := now.UTC().AppendFormat(vb[:0], time.RFC3339)
	v = append(v, '/')
	v = append(v, id...)
	return fastpath.AppendResponse(nil, v, fastpath.SecretType, id, resources)
}

// sdsRequest is what the SDS server reads of a DiscoveryRequest.
type sdsRequest struct {
	fastpath.Request
	names []string // resource_names, in order
}

// readRequest reads a DiscoveryRequest with fastpath's peeker and, as proto.Unmarshal does,
// refuses string fields that are not valid UTF-8.
func readRequest(p *fastpath.Peeker, data mem.BufferSlice, r *sdsRequest) error {
	r.names = nil
	var bad bool
	err := p.PeekRequestNames(data, &r.Request, func(name []byte) {
		bad = bad || !utf8.Valid(name)
		r.names = append(r.names, string(name))
	})
	switch {
	case err != nil:
		return err
	case bad:
		return fmt.Errorf("DiscoveryRequest resource_names: %w", fastpath.ErrInvalidUTF8)
	}
	return r.CheckUTF8()
}
