package probe

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
)

// socketProbe runs one tcpSocket or grpc action against a port of the target host, from the
// probe source address. Immutable.
type socketProbe struct {
	action *Action // its TCP or its GRPC is set
	host   string
	dial   dialer
	log    *slog.Logger
}

func (p *socketProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeoutOf(p.action))
	defer cancel()
	kind, check := "tcp", p.checkTCP
	var port int
	if t := p.action.TCP; t != nil { // the first of the two set, as the Prober picks
		port = t.Port
	} else {
		kind, port = "grpc", p.action.GRPC.Port
		check = func(ctx context.Context, addr string) error { return p.checkGRPC(ctx, addr, r.UserAgent()) } // grpc.go
	}
	addr := net.JoinHostPort(p.host, strconv.Itoa(port))
	if err := check(ctx, addr); err != nil {
		p.log.Debug("app "+kind+" probe failed", "path", p.action.Path, "addr", addr, "error", err)
		http.Error(w, kind+" probe "+addr+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// checkTCP is a tcpSocket action: a connection that opens is a success.
func (p *socketProbe) checkTCP(ctx context.Context, addr string) error {
	c, err := p.dial.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	_ = c.Close() // the probe is over once the connection opened
	return nil
}
