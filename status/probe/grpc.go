package probe

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// grpcProbe runs one grpc action: grpc.health.v1.Health/Check on a fresh connection (as
// kubelet does); SERVING is a success. Immutable.
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
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return p.dial.DialContext(ctx, "tcp", a)
		}),
	}
	if ua := r.UserAgent(); ua != "" {
		opts = append(opts, grpc.WithUserAgent(ua))
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		http.Error(w, "grpc probe "+addr+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: p.action.GRPC.Service})
	if err != nil {
		p.log.Debug("app grpc probe failed", "path", p.action.Path, "addr", addr, "error", err)
		http.Error(w, "grpc probe "+addr+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		http.Error(w, "grpc probe "+addr+": service status "+s.String(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}
