package dns

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/wingman-mesh/wingman/internal/metric"
)

// Defaults for the zero values of Config.
const (
	DefaultAddr                  = "localhost:15053"
	DefaultResolvConf            = "/etc/resolv.conf"
	DefaultForwardTimeout        = 5 * time.Second
	DefaultMaxConcurrentForwards = 1024
)

// Config is what the DNS proxy needs; cmd/ fills it from flags and the environment.
// It is read once by New and never changed afterwards.
type Config struct {
	// Addr is the listen address (DNS_PROXY_ADDR). For host "localhost" the proxy binds
	// 127.0.0.1 when resolv.conf lists an IPv4 nameserver (or none at all) and [::1] when it
	// lists an IPv6 one, as Istio does; any other host is bound as given. With port 0 one free
	// port is picked and shared by every address and by UDP and TCP, so a client that gets a
	// truncated UDP answer can retry over TCP at the same address. Default "localhost:15053".
	Addr string
	// ResolvConf is the resolv.conf whose nameservers get forwarded queries and whose first
	// search domain gets the CNAME shortcut. Default "/etc/resolv.conf". Besides the standard
	// "nameserver <ip>" form, "nameserver <ip>:<port>" and "nameserver [<ipv6>]:<port>" are
	// accepted, so tests can point at a server on a free port.
	ResolvConf string
	// Namespace is the pod's namespace (POD_NAMESPACE): Kubernetes services of this namespace
	// also answer to their bare short name.
	Namespace string
	// Domain is the proxy's DNS domain as passed to --domain ("<ns>.svc.cluster.local");
	// a leading label equal to Namespace is dropped, leaving the cluster suffix
	// ("svc.cluster.local"). Kubernetes hosts outside it get no short-name forms. Empty
	// disables short names.
	Domain string
	// ForwardTimeout bounds each upstream exchange (dial, write and read) (DNS_FORWARD_TIMEOUT).
	// Default 5s.
	ForwardTimeout time.Duration
	// ForwardParallel sends forwarded queries to every nameserver at once and relays the
	// first well-formed reply (DNS_FORWARD_PARALLEL); otherwise nameservers are tried one
	// after the other, starting at a random one, until one replies. Either way the reply is
	// relayed whatever its rcode, as Istio's queryUpstream does.
	ForwardParallel bool
	// MaxConcurrentForwards bounds the forwarded queries in flight; a query over the bound is
	// answered SERVFAIL at once instead of queueing. Default 1024.
	MaxConcurrentForwards int
	// RespondBeforeSync forwards every query upstream until the first NameTable arrives
	// (Istio does this when it owns port 53 as root); otherwise such queries get SERVFAIL.
	RespondBeforeSync bool
	// AutoAllocate records that Istiod was asked to auto-allocate addresses for ServiceEntry
	// hosts (ISTIO_META_DNS_AUTO_ALLOCATE). Allocation itself is Istiod's: the addresses arrive
	// in the NameTable and are answered like any other. The flag is reported in /debug/ndsz,
	// which also marks which answered addresses lie in Istio's auto-allocation ranges.
	AutoAllocate bool
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the istio_agent_dns_* metrics; nil registers none.
	Registerer *metric.Registry
}

// withDefaults returns c with zero values replaced by defaults, or an error naming the
// first invalid field.
func (c Config) withDefaults() (Config, error) {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.ResolvConf == "" {
		c.ResolvConf = DefaultResolvConf
	}
	if c.ForwardTimeout == 0 {
		c.ForwardTimeout = DefaultForwardTimeout
	}
	if c.ForwardTimeout < 0 {
		return c, fmt.Errorf("dns: ForwardTimeout %v is negative", c.ForwardTimeout)
	}
	if c.MaxConcurrentForwards == 0 {
		c.MaxConcurrentForwards = DefaultMaxConcurrentForwards
	}
	if c.MaxConcurrentForwards < 0 {
		return c, fmt.Errorf("dns: MaxConcurrentForwards %d is negative", c.MaxConcurrentForwards)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
