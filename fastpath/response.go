package fastpath

// Builders of DiscoveryResponses for the agent's own servers (SDS). A server marshals each
// resource once into a ready-made resources entry ([AppendResource]) shared by every stream, and
// a response is those entries framed by version, type URL and nonce ([AppendResponse]). The
// encodings are what proto.Marshal writes for the same messages (certs checks them byte for byte
// against go-control-plane's types).

// fieldSize is the encoded size of a length-delimited field with an n-byte value.
func fieldSize(field, n int) int {
	return varintLen(uint64(field)<<3) + varintLen(uint64(n)) + n
}

// stringSize is the encoded size of a string field, 0 when s is empty (proto3 omits it).
func stringSize(field int, s string) int {
	if s == "" {
		return 0
	}
	return fieldSize(field, len(s))
}

// ResourceSize is the size of the entry [AppendResource] writes.
func ResourceSize(typeURL string, bodyLen int) int {
	return fieldSize(respResource, anySize(typeURL, bodyLen))
}

func anySize(typeURL string, bodyLen int) int {
	n := stringSize(anyTypeURL, typeURL)
	if bodyLen > 0 {
		n += fieldSize(anyValue, bodyLen)
	}
	return n
}

// AppendResource appends one DiscoveryResponse.resources entry (field tag and length included):
// a google.protobuf.Any of type typeURL holding the encoded resource body.
func AppendResource(dst []byte, typeURL string, body []byte) []byte {
	dst = appendKey(dst, respResource, wireBytes)
	dst = appendVarint(dst, uint64(anySize(typeURL, len(body))))
	dst = appendStringField(dst, anyTypeURL, typeURL)
	if len(body) > 0 {
		dst = appendBytesField(dst, anyValue, body)
	}
	return dst
}

// ResponseSize is the number of bytes [AppendResponse] appends.
func ResponseSize(versionLen int, typeURL, nonce string, resources [][]byte) int {
	n := stringSize(respTypeURL, typeURL) + stringSize(respNonce, nonce)
	if versionLen > 0 {
		n += fieldSize(respVersion, versionLen)
	}
	for _, r := range resources {
		n += len(r)
	}
	return n
}

// AppendResponse appends a DiscoveryResponse: version_info, the resources (entries written by
// [AppendResource], copied as they are), type_url and nonce. When dst lacks room it is grown to
// exactly the size needed, so a response built from nil costs one allocation of its own size.
func AppendResponse(dst, version []byte, typeURL, nonce string, resources [][]byte) []byte {
	if n := ResponseSize(len(version), typeURL, nonce, resources); cap(dst)-len(dst) < n {
		grown := make([]byte, len(dst), len(dst)+n)
		copy(grown, dst)
		dst = grown
	}
	if len(version) > 0 {
		dst = appendBytesField(dst, respVersion, version)
	}
	for _, r := range resources {
		dst = append(dst, r...)
	}
	dst = appendStringField(dst, respTypeURL, typeURL)
	return appendStringField(dst, respNonce, nonce)
}
