package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ValidationExitCode is Istio's exit code for a failed --run-validation.
const ValidationExitCode = 126

// Validate checks that the capture works, as Istio's --run-validation does (the
// istio-validation init container of Istio CNI installs): it listens on Envoy's two ports on
// localhost and connects from localhost to the passthrough address (127.0.0.6, or ::6) on the
// probe port. The capture redirects that connection (for the proxy uid, which the validation
// container runs as) to one of the listeners, which reads the original destination: the probe
// port proves the redirect. It retries every second until timeout.
func Validate(ctx context.Context, cfg *Config, v6 bool) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.ProbeTimeout)
	defer cancel()
	listenIP, target := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.6")
	if v6 {
		listenIP, target = netip.IPv6Loopback(), netip.MustParseAddr("::6")
	}
	var lc net.ListenConfig
	var ls []net.Listener
	for _, p := range []uint16{cfg.ProxyPort, cfg.InboundCapturePort} {
		l, err := lc.Listen(ctx, "tcp", netip.AddrPortFrom(listenIP, p).String())
		if err != nil {
			continue // Istio carries on with the listeners it could open
		}
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		return fmt.Errorf("validation: cannot listen on %s ports %d and %d", listenIP, cfg.ProxyPort, cfg.InboundCapturePort)
	}
	ok := make(chan struct{}, len(ls))
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveProbe(l, cfg.ProbePort, ok)
		}()
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
		wg.Wait()
	}()

	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(listenIP, 0)), Timeout: time.Second}
	dst := netip.AddrPortFrom(target, cfg.ProbePort).String()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if c, err := d.DialContext(ctx, "tcp", dst); err == nil {
			c.Close()
		}
		select {
		case <-ok:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("validation: no connection to %s was redirected to port %d or %d within %s",
				dst, cfg.ProxyPort, cfg.InboundCapturePort, cfg.ProbeTimeout)
		case <-tick.C:
		}
	}
}

// serveProbe answers each connection with its original destination port and reports one whose
// original port is the probe port.
func serveProbe(l net.Listener, probePort uint16, ok chan<- struct{}) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, p, err := OriginalDst(c)
		if err == nil {
			_, _ = c.Write([]byte(strconv.Itoa(int(p))))
		}
		c.Close()
		if err == nil && p == probePort {
			select {
			case ok <- struct{}{}:
			default:
			}
		}
	}
}

// OriginalDst returns the destination a redirected TCP connection was addressed to before
// netfilter's REDIRECT (SO_ORIGINAL_DST); for a connection that was not redirected, its local
// address.
func OriginalDst(c net.Conn) (netip.Addr, uint16, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.Addr{}, 0, errors.New("not a TCP connection")
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.Addr{}, 0, err
	}
	local := tc.LocalAddr().(*net.TCPAddr).AddrPort()
	var addr netip.Addr
	var port uint16
	var serr error
	err = rc.Control(func(fd uintptr) {
		if local.Addr().Unmap().Is4() {
			// sockaddr_in fits the 20-byte ip_mreq-sized buffer.
			m, e := unix.GetsockoptIPv6Mreq(int(fd), syscall.SOL_IP, 80 /* SO_ORIGINAL_DST */)
			if e != nil {
				serr = e
				return
			}
			port = binary.BigEndian.Uint16(m.Multiaddr[2:4])
			addr = netip.AddrFrom4([4]byte(m.Multiaddr[4:8]))
			return
		}
		// sockaddr_in6 fits the 32-byte ip6_mtuinfo-sized buffer.
		m, e := unix.GetsockoptIPv6MTUInfo(int(fd), syscall.SOL_IPV6, 80 /* IP6T_SO_ORIGINAL_DST */)
		if e != nil {
			serr = e
			return
		}
		port = binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&m.Addr.Port))[:]) // network order in memory
		addr = netip.AddrFrom16(m.Addr.Addr)
	})
	if err != nil {
		return netip.Addr{}, 0, err
	}
	return addr, port, serr
}
