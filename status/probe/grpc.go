package probe

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/transport/h2grpc"
)

// grpcProbe runs one grpc action: grpc.health.v1.Health/Check over plaintext HTTP/2 on a fresh
// connection (as kubelet does), from the probe source address; SERVING is a success. Immutable.
type grpcProbe struct {
	action *Action
	host   string
	dial   dialer
	log    *slog.Logger
}

func (p *grpcProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeoutOf(p.action))
	defer cancel()
	addr := net.JoinHostPort(p.host, strconv.Itoa(p.action.GRPC.Port))
	cfg := h2grpc.ClientConfig{
		Address: addr,
		Dial:    func(ctx context.Context) (net.Conn, error) { return p.dial.DialContext(ctx, "tcp", addr) },
	}
	if ua := r.UserAgent(); ua != "" { // kubelet's, passed on as it was with grpc-go's client
		cfg.Header = func(context.Context) (http.Header, error) { return http.Header{"User-Agent": {ua}}, nil }
	}
	c, err := h2grpc.NewClient(cfg)
	if err != nil {
		http.Error(w, "grpc probe "+addr+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer c.Close()
	s, err := c.HealthCheck(ctx, p.action.GRPC.Service)
	if err != nil {
		p.log.Error(grpcFailure(err))
		http.Error(w, "grpc probe "+addr+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	if s != h2grpc.HealthServing {
		http.Error(w, "grpc probe "+addr+": service status "+s.String(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
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
