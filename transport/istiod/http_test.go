package istiod

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestStreamHeader: the HTTP/2 client's headers are the metadata (ClusterID, XDS_HEADER_* or
// CA_HEADER_* values) plus the token read afresh on every stream, and none when the token file is
// missing.
func TestStreamHeader(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	h := StreamHeader(Config{ClusterID: "Kubernetes", Metadata: map[string]string{"x-extra": "1"}, TokenFile: tok})
	got, err := h(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Get("clusterid") != "Kubernetes" || got.Get("x-extra") != "1" || got.Get("authorization") != "" {
		t.Fatalf("without a token file: %v", got)
	}
	for _, v := range []string{"one", "two"} {
		if err := os.WriteFile(tok, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := h(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got.Get("authorization") != "Bearer "+v {
			t.Fatalf("token %q: header %q", v, got.Get("authorization"))
		}
	}
}

// TestTLSConfigNilWhenPlaintext: plaintext gets no TLS; otherwise ALPN offers h2 only.
func TestTLSConfigNilWhenPlaintext(t *testing.T) {
	if tc, err := TLSConfig(Config{Plaintext: true}); tc != nil || err != nil {
		t.Fatalf("plaintext: %v, %v", tc, err)
	}
	tc, err := TLSConfig(Config{ServerName: "istiod.istio-system.svc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.NextProtos) != 1 || tc.NextProtos[0] != "h2" || tc.ServerName != "istiod.istio-system.svc" || tc.VerifyConnection == nil {
		t.Fatalf("tls: %+v", tc)
	}
}
