// Package node works out the proxy's identity the way Istio's agent does (app/cmd.go initProxy):
// its IP addresses (INSTANCE_IP first, then the addresses of up interfaces, minus excluded
// interfaces, with 127.0.0.1 and ::1 added when the interfaces give none), its IP mode and its node ID. Unlike Istio it
// never waits two minutes for interfaces: with INSTANCE_IP set it reads them once, otherwise it
// retries for at most Config.MaxWait.
package node

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"time"
)

// Interface is one network interface's name and addresses.
type Interface struct {
	Name  string
	Up    bool
	Addrs []netip.Addr
}

// Config is what Discover needs. Immutable.
type Config struct {
	Type              string     // sidecar, router, ...
	InstanceIP        netip.Addr // INSTANCE_IP; invalid when unset
	PodName           string
	PodNamespace      string
	Domain            string   // --domain; "" → <PodNamespace>.svc.cluster.local
	ExcludeInterfaces []string // traffic.sidecar.istio.io/excludeInterfaces
	// Interfaces lists the host's interfaces; nil → the real ones.
	Interfaces func() ([]Interface, error)
	// MaxWait bounds the retries while an up interface has no usable address yet and INSTANCE_IP
	// is unset [1s]; Istio waits up to 2 minutes.
	MaxWait time.Duration
	// RetryEvery is the retry period [100ms].
	RetryEvery time.Duration
}

// Identity is the proxy's node identity. Immutable.
type Identity struct {
	Type      string
	IPs       []string // first is the pod IP; bootstrap.AddressFamily gives their family
	ID        string   // <pod>.<namespace>
	DNSDomain string
}

// Discover returns the identity for cfg.
func Discover(ctx context.Context, cfg Config) Identity {
	if cfg.Interfaces == nil {
		cfg.Interfaces = SystemInterfaces
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = time.Second
	}
	if cfg.RetryEvery == 0 {
		cfg.RetryEvery = 100 * time.Millisecond
	}
	var ips []string
	if cfg.InstanceIP.IsValid() {
		ips = append(ips, cfg.InstanceIP.Unmap().String())
	}
	found, excluded := privateIPs(ctx, cfg)
	// As Istio's initProxy: the loopback pair stands in when the interfaces give no address,
	// whether or not INSTANCE_IP is set, and before the excluded interfaces' addresses are
	// taken out (so excluding every interface leaves INSTANCE_IP alone).
	if len(found) == 0 {
		found = []string{"127.0.0.1", "::1"}
	}
	for _, ip := range found {
		if !slices.Contains(ips, ip) && !excluded[ip] {
			ips = append(ips, ip)
		}
	}
	domain := cfg.Domain
	if domain == "" {
		domain = cfg.PodNamespace + ".svc.cluster.local"
	}
	return Identity{Type: cfg.Type, IPs: ips, ID: cfg.PodName + "." + cfg.PodNamespace, DNSDomain: domain}
}

// privateIPs returns the usable addresses of up interfaces, and the addresses of the excluded
// interfaces. Without INSTANCE_IP it retries, within MaxWait, while nothing usable is found or an
// up interface still reports an unspecified address.
func privateIPs(ctx context.Context, cfg Config) ([]string, map[string]bool) {
	deadline := time.Now().Add(cfg.MaxWait)
	for {
		ips, excluded, pending := scan(cfg)
		if cfg.InstanceIP.IsValid() || (!pending && len(ips) > 0) || !time.Now().Add(cfg.RetryEvery).Before(deadline) {
			return ips, excluded
		}
		t := time.NewTimer(cfg.RetryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return ips, excluded
		case <-t.C:
		}
	}
}

func scan(cfg Config) (ips []string, excluded map[string]bool, pending bool) {
	ifaces, err := cfg.Interfaces()
	if err != nil {
		return nil, nil, true
	}
	excluded = map[string]bool{}
	for _, ifc := range ifaces {
		skip := slices.Contains(cfg.ExcludeInterfaces, ifc.Name)
		if !ifc.Up && !skip {
			continue
		}
		for _, a := range ifc.Addrs {
			a = a.Unmap()
			if a.IsUnspecified() {
				pending = pending || !skip
				continue
			}
			if !a.IsValid() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
				continue
			}
			if skip {
				excluded[a.String()] = true
				if !ifc.Up {
					continue
				}
			}
			// An excluded interface's address is found too, and taken out by Discover after
			// the loopback fallback, as in Istio's initProxy.
			if s := a.String(); !slices.Contains(ips, s) {
				ips = append(ips, s)
			}
		}
	}
	return ips, excluded, pending
}

// SystemInterfaces lists the host's interfaces with net.Interfaces.
func SystemInterfaces() ([]Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Interface, 0, len(ifs))
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		i := Interface{Name: ifc.Name, Up: ifc.Flags&net.FlagUp != 0}
		for _, a := range addrs {
			var ip net.IP
			switch v := a.(type) {
			case *net.IPNet:
				ip = v.IP
			case *net.IPAddr:
				ip = v.IP
			}
			if na, ok := netip.AddrFromSlice(ip); ok {
				i.Addrs = append(i.Addrs, na)
			}
		}
		out = append(out, i)
	}
	return out, nil
}
