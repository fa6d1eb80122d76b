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

// resource is v's DiscoveryResponse.resources entry, encoded by the first stream that sends
// this version and shared by every other. One allocation: the Secret is written at the end of
// the entry's buffer and the Any's header in front of it.
func (v *secretValue) resource() []byte {
	v.once.Do(func() {
		n := secretSize(v.sec)
		buf := make([]byte, fastpath.ResourceSize(fastpath.SecretType, n))
		body := appendSecret(buf[len(buf)-n:len(buf)-n], v.sec)
		v.res = fastpath.AppendResource(buf[:0], fastpath.SecretType, body) // the body copies onto itself
	})
	return v.res
}

// encodeSecret encodes sec as a tls.v3.Secret.
func encodeSecret(sec secret) []byte {
	return appendSecret(make([]byte, 0, secretSize(sec)), sec)
}

// secretSize is the size of sec encoded.
func secretSize(sec secret) int {
	n := nameSize(sec.name)
	if sec.rootPEM == nil {
		return n + fieldSize(secretTLSCertificate, certSize(sec))
	}
	return n + fieldSize(secretValidationContext, rootsSize(sec))
}

func certSize(sec secret) int {
	return fieldSize(tlsCertChain, inlineSize(sec.chainPEM)) + fieldSize(tlsPrivateKey, inlineSize(sec.keyPEM))
}

func rootsSize(sec secret) int {
	n := fieldSize(validationTrustedCA, inlineSize(sec.rootPEM))
	if sec.crl != nil {
		n += fieldSize(validationCRL, inlineSize(sec.crl))
	}
	return n
}

// appendSecret appends sec as a tls.v3.Secret: a tls_certificate with the chain and key inline,
// or a validation_context trusting its roots, with its CRL when not nil.
func appendSecret(dst []byte, sec secret) []byte {
	dst = appendName(dst, sec.name)
	if sec.rootPEM == nil {
		return appendMessage(dst, secretTLSCertificate, certSize(sec), func(dst []byte) []byte {
			dst = appendInline(dst, tlsCertChain, sec.chainPEM)
			return appendInline(dst, tlsPrivateKey, sec.keyPEM)
		})
	}
	return appendMessage(dst, secretValidationContext, rootsSize(sec), func(dst []byte) []byte {
		dst = appendInline(dst, validationTrustedCA, sec.rootPEM)
		if sec.crl != nil {
			dst = appendInline(dst, validationCRL, sec.crl)
		}
		return dst
	})
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
