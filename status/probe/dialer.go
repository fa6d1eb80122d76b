package probe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Source addresses for probe connections. Istio's iptables rules let traffic from these
// addresses reach the application without passing through Envoy's inbound listener.
var (
	sourceV4 = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 6)}
	sourceV6 = &net.TCPAddr{IP: net.ParseIP("::6")}
)

// lingerSeconds bounds how long a closed probe socket lingers (Istio's SO_LINGER 1 s), so
// frequent probes do not pile up TIME_WAIT sockets.
const lingerSeconds = 1

// dialer dials probe targets from 127.0.0.6 (::6 for IPv6 literals) and falls back to the
// kernel's source address when that source cannot be used (not configured, not permitted, or
// the target is not reachable from it). Immutable after construction.
type dialer struct {
	noSource bool // skip the source bind entirely
}

// DialContext dials network/addr as described on dialer.
func (d dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if !d.noSource {
		if src := sourceFor(addr); src != nil {
			nd := net.Dialer{LocalAddr: src}
			c, err := nd.DialContext(ctx, network, addr)
			if err == nil {
				setLinger(c)
				return c, nil
			}
			if !sourceProblem(ctx, err) {
				return nil, err
			}
		}
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	setLinger(c)
	return c, nil
}

// sourceFor picks the source address for addr's family; names use the IPv4 source (Go's
// dialer then only tries the name's IPv4 addresses, and the fallback tries all of them).
func sourceFor(addr string) *net.TCPAddr {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return sourceV4
	}
	if ip.Unmap().Is4() {
		return sourceV4
	}
	return sourceV6
}

// sourceProblem reports whether a failed dial from the fixed source is worth retrying without
// it: the failure is about the source (cannot bind it, no route from it, no address of the
// matching family), not a refused connection or an expired deadline.
func sourceProblem(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

func setLinger(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(lingerSeconds) // best effort: a socket option failure does not fail the probe
	}
}

// timeoutOf is the probe's timeout: timeoutSeconds, or Kubernetes' default of one second.
func timeoutOf(a *Action) time.Duration {
	if a.TimeoutSeconds <= 0 {
		return time.Second
	}
	return time.Duration(a.TimeoutSeconds) * time.Second
}
