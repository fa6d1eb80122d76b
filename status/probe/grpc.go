package probe

import (
	"context"
	"errors"
	"net"
	"net/http"

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
		return err
	}
	if s != h2grpc.HealthServing {
		return errors.New("service status " + s.String())
	}
	return nil
}
