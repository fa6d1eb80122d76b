package certs

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	pb "istio.io/api/security/v1alpha1"

	"github.com/wingman-mesh/wingman/lab/testca"
)

// TestCARequestAsProtoMarshal: the request is byte for byte what proto.Marshal writes for the
// generated istio.io/api message Istio's agent sends (citadel client: csr, validity in seconds,
// metadata {CertSigner: signer}, set even when empty), and the generated type reads it back.
func TestCARequestAsProtoMarshal(t *testing.T) {
	for _, tc := range []struct {
		csr    string
		ttl    int64
		signer string
	}{
		{"-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n", 86400, ""},
		{"csr", 0, "signer-a"},
		{"", -1, strings.Repeat("s", 200)},
		{strings.Repeat("c", 5000), 1 << 40, "x"},
	} {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.IstioCertificateRequest{
			Csr: tc.csr, ValidityDuration: tc.ttl,
			Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"CertSigner": structpb.NewStringValue(tc.signer)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := appendCARequest(nil, []byte(tc.csr), tc.ttl, tc.signer)
		if string(got) != string(want) {
			t.Errorf("csr %d bytes, ttl %d, signer %q:\n got % x\nwant % x", len(tc.csr), tc.ttl, tc.signer, got, want)
		}
		var back pb.IstioCertificateRequest
		if err := proto.Unmarshal(got, &back); err != nil || back.GetCsr() != tc.csr || back.GetValidityDuration() != tc.ttl ||
			back.GetMetadata().GetFields()[certSignerKey].GetStringValue() != tc.signer {
			t.Errorf("read back: %v, %v", &back, err)
		}
	}
}

// realCAResponses are responses of the test CA (a real CA) to a real CSR, as the wire carries
// them, for every answer mode that returns a chain.
func realCAResponses(t testing.TB) [][]byte {
	t.Helper()
	cfg := Config{KeyType: KeyECDSA}
	key, err := generateKey(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := createCSR(key.signer, testca.SpiffeID("cluster.local", "default", "sleep"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := testca.New(testca.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, mode := range []testca.Mode{testca.ModeOK, testca.ModeGarbage, testca.ModeOneElement, testca.ModeUntrusted} {
		ca.SetMode(mode)
		resp, err := ca.CreateCertificate(context.Background(), &pb.IstioCertificateRequest{Csr: string(csr), ValidityDuration: 3600})
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestCAResponseReal: the test CA's responses decode to its chains.
func TestCAResponseReal(t *testing.T) {
	for _, b := range realCAResponses(t) {
		var want pb.IstioCertificateResponse
		if err := proto.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		got, err := parseCAResponse(b)
		if err != nil || strings.Join(got, "|") != strings.Join(want.GetCertChain(), "|") || len(got) != len(want.GetCertChain()) {
			t.Fatalf("%q, %v; want %q", got, err, want.GetCertChain())
		}
	}
}

// FuzzCAResponse: the decoder agrees with proto.Unmarshal of istio.io/api's generated type on
// every input: whether it decodes, and the chain.
func FuzzCAResponse(f *testing.F) {
	for _, b := range realCAResponses(f) {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0xc3, 0x28})      // a cert_chain element that is not UTF-8
	f.Add([]byte{0x08, 0x05, 0x0a, 0x01, 'a'}) // cert_chain as a varint (unknown), then a good one
	f.Add([]byte{0x12, 0x01, 'x', 0x0a, 0x00}) // an unknown field, then an empty element
	f.Add([]byte{0x0b, 0x0a, 0x01, 'a', 0x0c}) // a group holding a cert_chain-shaped field
	f.Add(protowire.AppendTag(nil, protowire.MaxValidNumber+1, protowire.VarintType))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseCAResponse(b)
		var want pb.IstioCertificateResponse
		werr := proto.Unmarshal(b, &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("% x: error %v, proto.Unmarshal's %v", b, err, werr)
		}
		if err != nil {
			return
		}
		w := want.GetCertChain()
		if len(got) != len(w) {
			t.Fatalf("% x: %d elements, proto.Unmarshal's %d", b, len(got), len(w))
		}
		for i := range got {
			if got[i] != w[i] {
				t.Fatalf("% x: element %d %q, proto.Unmarshal's %q", b, i, got[i], w[i])
			}
		}
	})
}
