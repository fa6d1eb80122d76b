package certs

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The Istio CA's messages, written and read on the wire: istio.io/api's generated package
// (security/v1alpha1) links grpc-go's client, which the agent does not otherwise need. Field
// numbers are those of istio.io/api security/v1alpha1/ca.proto:
//
//	IstioCertificateRequest:  string csr = 1; int64 validity_duration = 3; google.protobuf.Struct metadata = 4;
//	IstioCertificateResponse: repeated string cert_chain = 1;
//
// and of google/protobuf/struct.proto: Struct { map<string, Value> fields = 1 } (a map entry:
// key = 1, value = 2), Value { string string_value = 3 } (a oneof member). caproto_test.go
// checks the request byte for byte against proto.Marshal of the generated type, and
// FuzzCAResponse the response decoder against proto.Unmarshal.
const (
	caReqCSR      = 1
	caReqValidity = 3
	caReqMetadata = 4
	caRespChain   = 1

	structFields     = 1
	mapEntryKey      = 1
	mapEntryValue    = 2
	valueStringValue = 3
)

// certSignerKey is the metadata key Istio's CA client sends the CertSigner under (Istio's
// security.CertSigner).
const certSignerKey = "CertSigner"

// appendCARequest appends IstioCertificateRequest{csr, validity_duration, metadata{CertSigner:
// certSigner}} to b as proto.Marshal writes it: proto3 scalars only when not zero, the metadata
// always (Istio's client always sets it), the map entry's key and value and the oneof string
// always.
func appendCARequest(b, csr []byte, validitySec int64, certSigner string) []byte {
	if len(csr) > 0 {
		b = protowire.AppendTag(b, caReqCSR, protowire.BytesType)
		b = protowire.AppendBytes(b, csr)
	}
	if validitySec != 0 {
		b = protowire.AppendTag(b, caReqValidity, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(validitySec))
	}
	// Sizes from the inside out: Value, map entry, Struct.
	value := protowire.SizeTag(valueStringValue) + protowire.SizeBytes(len(certSigner))
	entry := protowire.SizeTag(mapEntryKey) + protowire.SizeBytes(len(certSignerKey)) +
		protowire.SizeTag(mapEntryValue) + protowire.SizeBytes(value)
	strct := protowire.SizeTag(structFields) + protowire.SizeBytes(entry)
	b = protowire.AppendTag(b, caReqMetadata, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(strct))
	b = protowire.AppendTag(b, structFields, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(entry))
	b = protowire.AppendTag(b, mapEntryKey, protowire.BytesType)
	b = protowire.AppendString(b, certSignerKey)
	b = protowire.AppendTag(b, mapEntryValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(value))
	b = protowire.AppendTag(b, valueStringValue, protowire.BytesType)
	return protowire.AppendString(b, certSigner)
}

// parseCAResponse reads IstioCertificateResponse's cert_chain as proto.Unmarshal reads it: every
// cert_chain field in order, each valid UTF-8 (a proto3 string); fields of other numbers, and
// cert_chain fields of another wire type, skipped as unknown fields; malformed wire data an
// error.
func parseCAResponse(b []byte) ([]string, error) {
	var chain []string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber { // ConsumeTag checks only the lower bound
			return nil, fmt.Errorf("field number %d out of range", num)
		}
		b = b[n:]
		if num == caRespChain && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			if !utf8.Valid(v) {
				return nil, fmt.Errorf("cert_chain[%d] is not valid UTF-8", len(chain))
			}
			chain = append(chain, string(v))
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return chain, nil
}
