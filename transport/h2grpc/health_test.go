package h2grpc

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestHealthCheck calls grpc-go's own health server: each service's status comes back, the
// server as a whole ("") is SERVING, and a service it does not know is its NotFound status.
func TestHealthCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus("odd", healthpb.HealthCheckResponse_ServingStatus(7))
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	defer func() { srv.Stop(); <-done }()
	c := newTestClientConfig(t, ClientConfig{Address: l.Addr().String()}, nil)
	for service, want := range map[string]HealthStatus{"": HealthServing, "up": HealthServing, "down": HealthNotServing, "odd": 7} {
		got, err := c.HealthCheck(testCtx(t), service)
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", service, got, err, want)
		}
		if pb := healthpb.HealthCheckResponse_ServingStatus(want).String(); got.String() != pb {
			t.Errorf("%q: name %q, protobuf-go's %q", service, got, pb)
		}
	}
	if _, err := c.HealthCheck(testCtx(t), "missing"); status.Code(err) != codes.NotFound {
		t.Errorf("unknown service: %v, want NotFound", err)
	}
}

// TestHealthCheckRequest: the request is what protobuf-go writes for the same message.
func TestHealthCheckRequest(t *testing.T) {
	for _, service := range []string{"", "svc", string(make([]byte, 300))} {
		want, err := proto.Marshal(&healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendHealthCheckRequest(nil, service); string(got) != string(want) {
			t.Errorf("%q: % x, want % x", service, got, want)
		}
	}
}

// FuzzHealthCheckResponse: the parser agrees with proto.Unmarshal on every input, on whether it
// decodes and on the status it finds.
func FuzzHealthCheckResponse(f *testing.F) {
	for _, s := range []healthpb.HealthCheckResponse_ServingStatus{0, 1, 2, 3, -1, 1 << 30} {
		b, err := proto.Marshal(&healthpb.HealthCheckResponse{Status: s})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x08, 0x01, 0x12, 0x00})                                                 // an unknown field after the status
	f.Add([]byte{0x0a, 0x01, 0x00, 0x08, 0x02})                                           // status with the wrong wire type, then a good one
	f.Add(protowire.AppendVarint([]byte{0x08}, 1<<40|2))                                  // a varint wider than 32 bits
	f.Add([]byte{0x0b, 0x08, 0x01, 0x0c})                                                 // a group
	f.Add([]byte{0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}) // an overlong varint
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseHealthCheckResponse(b)
		var want healthpb.HealthCheckResponse
		werr := proto.Unmarshal(b, &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("% x: error %v, proto.Unmarshal's %v", b, err, werr)
		}
		if err == nil && int32(got) != int32(want.GetStatus()) {
			t.Fatalf("% x: status %d, proto.Unmarshal's %d", b, got, want.GetStatus())
		}
	})
}
