package certs

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/lab/framecodec"
)

var det = proto.MarshalOptions{Deterministic: true}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := det.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func inlineDS(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

// TestSecretEncodingMatchesProto: the hand-written Secret encodings are byte for byte what
// go-control-plane's types marshal to, for short, empty and long (multi-byte length) values.
func TestSecretEncodingMatchesProto(t *testing.T) {
	long := bytes.Repeat([]byte("A"), 70000)
	for _, tc := range []struct{ name, chain, key string }{
		{"default", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n"},
		{"", "", ""},
		{strings.Repeat("n", 200), string(long), string(long[:130])},
	} {
		want := mustMarshal(t, &tlsv3.Secret{Name: tc.name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: inlineDS([]byte(tc.chain)), PrivateKey: inlineDS([]byte(tc.key))}}})
		got := encodeSecret(certSecret(tc.name, []byte(tc.chain), []byte(tc.key)))
		if !bytes.Equal(got, want) {
			t.Errorf("certSecret(%.10q): %x\nwant %x", tc.name, trim(got), trim(want))
		}
		want = mustMarshal(t, &tlsv3.Secret{Name: tc.name, Type: &tlsv3.Secret_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: inlineDS([]byte(tc.chain))}}})
		got = encodeSecret(rootSecret(tc.name, []byte(tc.chain), nil))
		if !bytes.Equal(got, want) {
			t.Errorf("rootSecret(%.10q): %x\nwant %x", tc.name, trim(got), trim(want))
		}
		if cap(got) != len(got) {
			t.Errorf("rootSecret(%.10q): cap %d, len %d: size computed wrong", tc.name, cap(got), len(got))
		}
		// With a CRL (PILOT_ENABLE_CA_CRL), as CertificateValidationContext.crl.
		crl := []byte(tc.key)
		want = mustMarshal(t, &tlsv3.Secret{Name: tc.name, Type: &tlsv3.Secret_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: inlineDS([]byte(tc.chain)), Crl: inlineDS(crl)}}})
		got = encodeSecret(rootSecret(tc.name, []byte(tc.chain), crl))
		if !bytes.Equal(got, want) || cap(got) != len(got) {
			t.Errorf("rootSecret(%.10q) with CRL: %x\nwant %x", tc.name, trim(got), trim(want))
		}
	}
}

// TestResponseEncodingMatchesProto: a response built from shared resource encodings is what
// marshalling the DiscoveryResponse with Any resources gives, for 0, 1 and 3 resources.
func TestResponseEncodingMatchesProto(t *testing.T) {
	secrets := []secret{certSecret("default", []byte("chain"), []byte("key")), rootSecret("ROOTCA", []byte("root"), nil),
		certSecret("big", bytes.Repeat([]byte("c"), 20000), []byte("k"))}
	now := time.Date(2026, 12, 2, 14, 0, 5, 123, time.FixedZone("x", 3600))
	for n := 0; n <= len(secrets); n++ {
		for _, id := range []string{"1", "18446744073709551615"} {
			var res [][]byte
			want := &discovery.DiscoveryResponse{VersionInfo: "2026-12-02T13:00:05Z/" + id, TypeUrl: fastpath.SecretType, Nonce: id}
			for _, s := range secrets[:n] {
				res = append(res, resourceField(encodeSecret(s)))
				want.Resources = append(want.Resources, &anypb.Any{TypeUrl: fastpath.SecretType, Value: encodeSecret(s)})
			}
			got := encodeResponse(now, id, res)
			if w := mustMarshal(t, want); !bytes.Equal(got, w) {
				t.Errorf("%d resources, id %s: %x\nwant %x", n, id, trim(got), trim(w))
			}
			if cap(got) != len(got) {
				t.Errorf("%d resources: cap %d, len %d: size computed wrong", n, cap(got), len(got))
			}
		}
	}
}

func trim(b []byte) []byte { return b[:min(len(b), 64)] }

// TestParseRequest: requests marshalled by go-control-plane, alone and concatenated (which proto
// merges), read as proto.Unmarshal reads them.
func TestParseRequest(t *testing.T) {
	reqs := []*discovery.DiscoveryRequest{
		{},
		{Node: &corev3.Node{Id: "sidecar~10.0.0.1~a.b~b.svc.cluster.local", Cluster: "c"}, TypeUrl: fastpath.SecretType,
			ResourceNames: []string{"default", "ROOTCA"}, VersionInfo: "v"},
		{TypeUrl: fastpath.SecretType, ResponseNonce: "7", ResourceNames: []string{"default"},
			ErrorDetail: &rpcstatus.Status{Code: 3, Message: "bad secret"}},
		{ErrorDetail: &rpcstatus.Status{}, Node: &corev3.Node{Cluster: "no id"}},
		{TypeUrl: fastpath.HealthInfoType},
	}
	for i, a := range reqs {
		for j, b := range reqs {
			data := append(mustMarshal(t, a), mustMarshal(t, b)...)
			if i == j {
				data = mustMarshal(t, a)
			}
			checkParse(t, data)
		}
	}
}

// parse reads data as the SDS server does.
func parse(data []byte, r *sdsRequest) error {
	var p fastpath.Peeker
	return readRequest(&p, fastpath.FrameOf(data).Data, r)
}

// checkParse: when proto.Unmarshal accepts data, readRequest must too, with the same fields;
// when readRequest refuses data, proto.Unmarshal must too.
func checkParse(t *testing.T, data []byte) {
	t.Helper()
	var got sdsRequest
	perr := parse(data, &got)
	want := &discovery.DiscoveryRequest{}
	if err := proto.Unmarshal(data, want); err != nil {
		return // readRequest reads fewer fields, so it may accept what proto refuses
	}
	if perr != nil {
		t.Fatalf("readRequest(%x): %v; proto.Unmarshal accepts it", data, perr)
	}
	if got.TypeURL != want.GetTypeUrl() || got.NodeID != want.GetNode().GetId() || got.Nonce != want.GetResponseNonce() ||
		got.HasError != (want.GetErrorDetail() != nil) || got.ErrorMsg != want.GetErrorDetail().GetMessage() ||
		strings.Join(got.names, "\x00") != strings.Join(want.GetResourceNames(), "\x00") ||
		len(got.names) != len(want.GetResourceNames()) {
		t.Fatalf("readRequest(%x) = %+v; proto.Unmarshal gives %v", data, got, want)
	}
}

func TestParseRequestBadInput(t *testing.T) {
	for name, data := range map[string][]byte{
		"truncated tag":        {0x80},
		"truncated length":     {0x22, 0x05, 'a'},
		"field number zero":    {0x02, 0x00},
		"bad utf-8 type url":   {0x22, 0x01, 0xff},
		"bad utf-8 node id":    {0x12, 0x03, 0x0a, 0x01, 0xff},
		"bad utf-8 name":       {0x1a, 0x02, 0xc3, 0x28},
		"truncated node":       {0x12, 0x03, 0x0a, 0x05, 'a'},
		"bad varint unknown":   {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"unterminated group":   {0x0b},
		"bad utf-8 nack msg":   {0x32, 0x03, 0x12, 0x01, 0xfe},
		"truncated error body": {0x32, 0x04, 0x12},
	} {
		var r sdsRequest
		if err := parse(data, &r); err == nil {
			t.Errorf("%s: no error", name)
		}
		if err := proto.Unmarshal(data, &discovery.DiscoveryRequest{}); err == nil {
			t.Errorf("%s: proto.Unmarshal accepts it: the test input is wrong", name)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add(mustMarshal(f, &discovery.DiscoveryRequest{Node: &corev3.Node{Id: "n"}, TypeUrl: fastpath.SecretType,
		ResourceNames: []string{"default", "ROOTCA"}, ResponseNonce: "1"}))
	f.Add(mustMarshal(f, &discovery.DiscoveryRequest{ErrorDetail: &rpcstatus.Status{Code: 3, Message: "m"}, VersionInfo: "v"}))
	f.Add([]byte{0x12, 0x03, 0x0a, 0x01, 'x', 0x0b, 0x0c})
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, data) })
}

// TestUnimplementedMethods: DeltaSecrets and FetchSecrets answer as generated servers do, and a
// request that is not a DiscoveryRequest ends the stream with gRPC's unmarshal status.
func TestUnimplementedMethods(t *testing.T) {
	e := newEnv(t, nil)
	conn, err := grpc.NewClient("unix://"+e.srv.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := secretv3.NewSecretDiscoveryServiceClient(conn)
	_, err = client.FetchSecrets(e.ctx, &discovery.DiscoveryRequest{TypeUrl: fastpath.SecretType})
	if s := grpcstatus.Convert(err); s.Code() != codes.Unimplemented || s.Message() != "method FetchSecrets not implemented" {
		t.Errorf("FetchSecrets: %v", err)
	}
	delta, err := client.DeltaSecrets(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := delta.Recv(); grpcstatus.Code(err) != codes.Unimplemented || grpcstatus.Convert(err).Message() != "method DeltaSecrets not implemented" {
		t.Errorf("DeltaSecrets: %v", err)
	}

	raw, err := conn.NewStream(e.ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
		"/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets", grpc.ForceCodecV2(framecodec.Codec{}))
	if err != nil {
		t.Fatal(err)
	}
	bad := fastpath.FrameOf([]byte{0x22, 0x01, 0xff}) // type_url that is not UTF-8
	if err := raw.SendMsg(&bad); err != nil {
		t.Fatal(err)
	}
	var resp fastpath.Frame
	defer resp.Free()
	if err := raw.RecvMsg(&resp); grpcstatus.Code(err) != codes.Internal || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("malformed request: %v", err)
	}
}
