package dns

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// resolvConf is the part of resolv.conf the proxy uses. Immutable after parsing.
type resolvConf struct {
	// servers are upstream nameservers; port 53 unless the file gave one.
	servers []netip.AddrPort
	// search is the search list ("search" or "domain", the last one wins as in glibc).
	search []string
}

// readResolvConf reads and parses the resolv.conf at path.
func readResolvConf(path string) (resolvConf, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return resolvConf{}, fmt.Errorf("dns: read resolv.conf: %w", err)
	}
	rc, err := parseResolvConf(raw)
	if err != nil {
		return resolvConf{}, fmt.Errorf("dns: parse resolv.conf %s: %w", path, err)
	}
	return rc, nil
}

// parseResolvConf parses resolv.conf content. Unknown keywords (options, sortlist...) are
// ignored; a nameserver that is not an address is an error naming the line.
func parseResolvConf(raw []byte) (resolvConf, error) {
	var rc resolvConf
	sc := bufio.NewScanner(bytes.NewReader(raw))
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) < 2 {
				return rc, fmt.Errorf("line %d: nameserver without an address", line)
			}
			ap, err := parseNameserver(f[1])
			if err != nil {
				return rc, fmt.Errorf("line %d: %w", line, err)
			}
			rc.servers = append(rc.servers, ap)
		case "search":
			rc.search = append([]string(nil), f[1:]...)
		case "domain": // as miekg/dns's ClientConfigFromReader, which Istio uses: a bare
			// "domain" clears the search list
			rc.search = nil
			if len(f) > 1 {
				rc.search = []string{f[1]}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return rc, err
	}
	return rc, nil
}

// parseNameserver accepts "ip", "ip%zone", "ip:port" and "[ipv6]:port".
func parseNameserver(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), 53), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("nameserver %q is not an IP address or IP:port", s)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}
