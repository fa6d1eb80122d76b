package h2grpc

import "testing"

// The expected encodings follow the gRPC HTTP/2 protocol document ("Status-Message": percent-
// encode bytes outside 0x20-0x7E and '%'); the interop tests check the same against grpc-go
// in both directions.
func TestGrpcMessageEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"":             "",
		"plain text":   "plain text",
		"100%":         "100%25",
		"a\nb\tc":      "a%0Ab%09c",
		"é":            "%C3%A9",
		"\x7f~":        "%7F~",
		"%41 stays %2": "%2541 stays %252",
	} {
		if got := encodeGrpcMessage(in); got != want {
			t.Errorf("encode %q: %q, want %q", in, got, want)
		}
		if got := decodeGrpcMessage(want); got != in {
			t.Errorf("decode %q: %q, want %q", want, got, in)
		}
	}
	// A bad escape is kept as it is, as the document asks of receivers.
	for in, want := range map[string]string{"%": "%", "%4": "%4", "%zz": "%zz", "a%4g": "a%4g"} {
		if got := decodeGrpcMessage(in); got != want {
			t.Errorf("decode %q: %q, want %q", in, got, want)
		}
	}
}

// FuzzGrpcMessage: a grpc-message from a peer never panics the decoder; anything we encode
// is printable ASCII and decodes back to itself.
func FuzzGrpcMessage(f *testing.F) {
	for _, s := range []string{"", "%", "%2", "%25", "héllo", "a\nb", "%zz%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = decodeGrpcMessage(s)
		enc := encodeGrpcMessage(s)
		for i := 0; i < len(enc); i++ {
			if needsEscape(enc[i]) && enc[i] != '%' {
				t.Fatalf("encoded %q has byte %#x", enc, enc[i])
			}
		}
		if got := decodeGrpcMessage(enc); got != s {
			t.Fatalf("round trip of %q: %q", s, got)
		}
	})
}
