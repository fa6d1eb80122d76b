package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/transport/h2grpc"
)

// checkGRPC is a grpc action: grpc.health.v1.Health/Check over plaintext HTTP/2 on a fresh
// connection (as kubelet does), with kubelet's User-Agent when it sent one; SERVING is a success.
func (p *socketProbe) checkGRPC(ctx context.Context, addr, userAgent string) error {
	cfg := h2grpc.ClientConfig{
		Address: addr,
		Dial:    func(ctx context.Context) (net.Conn, error) { return p.dial.DialContext(ctx, "tcp", addr) },
	}
	if userAgent != "" { // kubelet's, passed on as it was with grpc-go's client
		cfg.Header = func(context.Context) (http.Header, error) { return http.Header{"User-Agent": {userAgent}}, nil }
	}
	c, err := h2grpc.NewClient(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.HealthCheck(ctx, p.action.GRPC.Service)
	if err != nil {
		p.log.Error(grpcFailure(err)) // Istio logs a failed gRPC probe at error
		return err
	}
	if s != h2grpc.HealthServing {
		return errors.New("service status " + s.String())
	}
	return nil
}

// grpcFailure is Istio's line for a failed gRPC probe (pilot/cmd/pilot-agent/status/server.go
// handleAppProbeGRPC at 1.30.3, after Kubernetes' grpc prober).
func grpcFailure(err error) string {
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unimplemented:
			return fmt.Sprintf("server does not implement the grpc health protocol (grpc.health.v1.Health): %v", err)
		case codes.DeadlineExceeded:
			return fmt.Sprintf("grpc request not finished within timeout: %v", err)
		}
	}
	return fmt.Sprintf("grpc probe failed: %v", err)
}
