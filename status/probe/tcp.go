package probe

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
)

// tcpProbe runs one tcpSocket action: a connection that opens is a success. Immutable.
type tcpProbe struct {
	action *Action
	host   string
	dial   dialer
	log    *slog.Logger
}

func (p *tcpProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeoutOf(p.action))
	defer cancel()
	addr := net.JoinHostPort(p.host, strconv.Itoa(p.action.TCP.Port))
	c, err := p.dial.DialContext(ctx, "tcp", addr)
	if err != nil {
		p.log.Debug("app tcp probe failed", "path", p.action.Path, "addr", addr, "error", err)
		http.Error(w, "tcp probe "+addr+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	_ = c.Close() // the probe is over once the connection opened
	w.WriteHeader(http.StatusOK)
}
