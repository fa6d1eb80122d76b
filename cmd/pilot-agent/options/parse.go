package options

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// parser reads typed values from the environment and collects one error per bad variable.
type parser struct {
	env  map[string]string
	errs []error
	seen map[string]bool // names read, for the documentation test
}

func (p *parser) raw(name string) (string, bool) {
	if p.seen != nil {
		p.seen[name] = true
	}
	v, ok := p.env[name]
	return v, ok
}

func (p *parser) fail(name, value string, err error) {
	p.errs = append(p.errs, fmt.Errorf("environment variable %s=%q: %w", name, value, err))
}

func (p *parser) str(name, def string) string {
	if v, ok := p.raw(name); ok {
		return v
	}
	return def
}

func (p *parser) boolean(name string, def bool) bool {
	v, ok := p.raw(name)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, v, errors.New("not a boolean (want true or false)"))
		return def
	}
	return b
}

// optBool is a boolean whose absence matters (nil when unset).
func (p *parser) optBool(name string) *bool {
	v, ok := p.raw(name)
	if !ok || v == "" {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, v, errors.New("not a boolean (want true or false)"))
		return nil
	}
	return &b
}

func (p *parser) duration(name string, def time.Duration) time.Duration {
	v, ok := p.raw(name)
	if !ok || v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		p.fail(name, v, errors.New("not a duration (e.g. 5s, 1m30s)"))
		return def
	}
	if d < 0 {
		p.fail(name, v, errors.New("negative duration"))
		return def
	}
	return d
}

func (p *parser) integer(name string, def, lo, hi int) int {
	v, ok := p.raw(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.fail(name, v, errors.New("not an integer"))
		return def
	}
	if n < lo || n > hi {
		p.fail(name, v, fmt.Errorf("out of range %d-%d", lo, hi))
		return def
	}
	return n
}

func (p *parser) port(name string, def int) int { return p.integer(name, def, 0, 65535) }

func (p *parser) ratio(name string, def float64) float64 {
	v, ok := p.raw(name)
	if !ok || v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		p.fail(name, v, errors.New("not a number"))
		return def
	}
	if f < 0 || f > 1 {
		p.fail(name, v, errors.New("out of range 0-1"))
		return def
	}
	return f
}

// memLimitRatio is the share of the cgroup memory limit the agent gives the Go runtime as its
// soft limit, as Istio's agent (automemlimit): AUTOMEMLIMIT in (0, 1], default 0.9; 0 when
// AUTOMEMLIMIT is "off" or GOMEMLIMIT is set (the runtime applies that itself).
func (p *parser) memLimitRatio() float64 {
	v, _ := p.raw("AUTOMEMLIMIT")
	if g, _ := p.raw("GOMEMLIMIT"); g != "" {
		return 0
	}
	switch v {
	case "":
		return 0.9
	case "off":
		return 0
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0 && f <= 1) {
		p.fail("AUTOMEMLIMIT", v, errors.New(`want a ratio in (0, 1] or "off"`))
		return 0
	}
	return f
}

func (p *parser) enum(name, def string, allowed ...string) string {
	v, ok := p.raw(name)
	if !ok || v == "" {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.fail(name, v, fmt.Errorf("want one of %s", strings.Join(allowed, ", ")))
	return def
}

func (p *parser) ip(name string) netip.Addr {
	v, ok := p.raw(name)
	if !ok || v == "" {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		p.fail(name, v, errors.New("not an IP address"))
		return netip.Addr{}
	}
	return a
}

func (p *parser) hostPort(name, def string) string {
	v := p.str(name, def)
	host, port, err := net.SplitHostPort(v)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil || (host == "" && v != def) {
		p.fail(name, v, errors.New("want host:port"))
		return def
	}
	return v
}

func (p *parser) list(name string, def []string) []string {
	v, ok := p.raw(name)
	if !ok {
		return def
	}
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (p *parser) prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range p.list(name, nil) {
		pr, err := netip.ParsePrefix(s)
		if err != nil {
			p.fail(name, s, errors.New("not a CIDR"))
			continue
		}
		out = append(out, pr)
	}
	return out
}

func (p *parser) jsonText(name string) string {
	v := p.str(name, "")
	if v != "" && !json.Valid([]byte(v)) {
		p.fail(name, v, errors.New("not valid JSON"))
		return ""
	}
	return v
}

// withPrefix returns the variables named prefix+X as X → value.
func (p *parser) withPrefix(prefix string) map[string]string {
	if p.seen != nil {
		p.seen[prefix+"*"] = true
	}
	var m map[string]string
	for k, v := range p.env {
		if name, ok := strings.CutPrefix(k, prefix); ok && name != "" {
			if m == nil {
				m = make(map[string]string)
			}
			m[name] = v
		}
	}
	return m
}
