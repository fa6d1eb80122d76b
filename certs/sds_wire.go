package certs

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The SDS server speaks protobuf wire format directly: the few messages it writes and the one it
// reads are small, and encoding them by hand keeps go-control-plane's generated types (and the
// Envoy config closure they pull in) out of the agent. Field numbers are those of Envoy's protos;
// sds_wire_test.go checks every encoding byte for byte against go-control-plane's marshalling.
const (
	secretName              = 1 // extensions.transport_sockets.tls.v3.Secret.name
	secretTLSCertificate    = 2 //   .tls_certificate
	secretValidationContext = 4 //   .validation_context
	tlsCertChain            = 1 // TlsCertificate.certificate_chain
	tlsPrivateKey           = 2 // TlsCertificate.private_key
	validationTrustedCA     = 1 // CertificateValidationContext.trusted_ca
	validationCRL           = 7 //   .crl
	dataSourceInlineBytes   = 2 // config.core.v3.DataSource.inline_bytes
	anyTypeURL              = 1 // google.protobuf.Any.type_url
	anyValue                = 2 //   .value

	respVersion  = 1 // service.discovery.v3.DiscoveryResponse.version_info
	respResource = 2 //   .resources
	respTypeURL  = 4 //   .type_url
	respNonce    = 5 //   .nonce
	reqNode      = 2 // DiscoveryRequest.node
	reqNames     = 3 //   .resource_names
	reqTypeURL   = 4 //   .type_url
	reqNonce     = 5 //   .response_nonce
	reqError     = 6 //   .error_detail
	nodeID       = 1 // config.core.v3.Node.id
	statusMsg    = 2 // google.rpc.Status.message
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
	anySize := fieldSize(anyTypeURL, len(secretTypeURL)) + fieldSize(anyValue, len(body))
	b := make([]byte, 0, fieldSize(respResource, anySize))
	return appendMessage(b, respResource, anySize, func(dst []byte) []byte {
		dst = protowire.AppendTag(dst, anyTypeURL, protowire.BytesType)
		dst = protowire.AppendString(dst, secretTypeURL)
		dst = protowire.AppendTag(dst, anyValue, protowire.BytesType)
		return protowire.AppendBytes(dst, body)
	})
}

// encodeResponse encodes a DiscoveryResponse of Secrets: version_info is now (RFC 3339, UTC) + "/"
// + id, the nonce is id; resources are resourceField encodings, in order. One allocation.
func encodeResponse(now time.Time, id string, resources [][]byte) []byte {
	var tb [64]byte
	ts := now.UTC().AppendFormat(tb[:0], time.RFC3339)
	vlen := len(ts) + 1 + len(id)
	n := fieldSize(respVersion, vlen) + fieldSize(respTypeURL, len(secretTypeURL))
	if id != "" {
		n += fieldSize(respNonce, len(id))
	}
	for _, r := range resources {
		n += len(r)
	}
	b := make([]byte, 0, n)
	b = protowire.AppendTag(b, respVersion, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(vlen))
	b = append(b, ts...)
	b = append(b, '/')
	b = append(b, id...)
	for _, r := range resources {
		b = append(b, r...)
	}
	b = protowire.AppendTag(b, respTypeURL, protowire.BytesType)
	b = protowire.AppendString(b, secretTypeURL)
	if id != "" {
		b = protowire.AppendTag(b, respNonce, protowire.BytesType)
		b = protowire.AppendString(b, id)
	}
	return b
}

// sdsRequest is what the SDS server reads of a DiscoveryRequest.
type sdsRequest struct {
	typeURL  string
	nodeID   string // node.id; "" when there is no node
	names    []string
	nonce    string // response_nonce
	hasError bool   // error_detail is set: a NACK
	errMsg   string // error_detail.message
}

var errMalformed = errors.New("malformed protobuf")

// parseRequest decodes a DiscoveryRequest with proto3 semantics: the last value of a repeated
// scalar occurrence wins, occurrences of a message field merge, unknown fields are skipped, and
// the string fields read must be valid UTF-8 (as proto.Unmarshal requires).
func parseRequest(b []byte, r *sdsRequest) error {
	*r = sdsRequest{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("DiscoveryRequest: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != reqNode && num != reqNames && num != reqTypeURL && num != reqNonce && num != reqError) {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("DiscoveryRequest field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("DiscoveryRequest field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		var err error
		switch num {
		case reqNode:
			err = lastString(v, nodeID, &r.nodeID)
		case reqError:
			r.hasError = true
			err = lastString(v, statusMsg, &r.errMsg)
		case reqNames:
			var s string
			if s, err = utf8String(v); err == nil {
				r.names = append(r.names, s)
			}
		case reqTypeURL:
			r.typeURL, err = utf8String(v)
		case reqNonce:
			r.nonce, err = utf8String(v)
		}
		if err != nil {
			return fmt.Errorf("DiscoveryRequest field %d: %w", num, err)
		}
	}
	return nil
}

// lastString sets *dst to the last occurrence of string field want in the message msg (leaving
// it as it was when there is none, so occurrences of msg merge).
func lastString(msg []byte, want protowire.Number, dst *string) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		if num == want && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(msg)
			if n < 0 {
				return protowire.ParseError(n)
			}
			msg = msg[n:]
			s, err := utf8String(v)
			if err != nil {
				return fmt.Errorf("field %d: %w", want, err)
			}
			*dst = s
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
	}
	return nil
}

func utf8String(b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: string field is not valid UTF-8", errMalformed)
	}
	return string(b), nil
}
