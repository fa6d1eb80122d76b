package capture

import (
	"context"
	"errors"
	"strconv"
	"strings"
)

// RouteCommands are the iproute2 commands the capture needs besides netfilter, as Istio's
// ConfigureRoutes does them: with IPv6, the address ::6 on lo (Envoy's inbound passthrough
// binds it as its source, as 127.0.0.6 for IPv4, which lo already covers); in TPROXY mode with
// captured inbound ports, packets carrying the TPROXY mark are routed through a table that
// delivers everything locally.
func RouteCommands(cfg *Config) [][]string {
	var cmds [][]string
	if cfg.IPv6 {
		cmds = append(cmds, []string{"-6", "addr", "add", "::6/128", "dev", "lo"})
	}
	if cfg.Mode != TProxy || cfg.InboundPorts.Empty() {
		return cmds
	}
	table := strconv.Itoa(cfg.TProxyRouteTable)
	fams := []struct{ flag, dst string }{{"-4", "0.0.0.0/0"}}
	if cfg.IPv6 {
		fams = append(fams, struct{ flag, dst string }{"-6", "::/0"})
	}
	for _, f := range fams {
		cmds = append(cmds,
			[]string{f.flag, "rule", "add", "fwmark", cfg.TProxyMark, "lookup", table},
			[]string{f.flag, "route", "add", "local", f.dst, "dev", "lo", "table", table})
	}
	return cmds
}

// ConfigureRoutes runs RouteCommands; what already exists is fine (re-runs are idempotent).
func ConfigureRoutes(ctx context.Context, r Runner, cfg *Config) error {
	for _, c := range RouteCommands(cfg) {
		if _, err := r.Run(ctx, "", "ip", c...); err != nil && !alreadyExists(err) {
			return err
		}
		if len(c) > 1 && c[1] == "rule" {
			// ip rule add does not refuse duplicates on every kernel: keep exactly one.
			if err := dedupRule(ctx, r, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// RemoveRoutes undoes the TPROXY routing (the ::6 address stays: Envoy may still use it).
func RemoveRoutes(ctx context.Context, r Runner, cfg *Config) {
	for _, c := range RouteCommands(cfg) {
		if c[1] == "addr" {
			continue
		}
		del := append([]string(nil), c...)
		del[2] = "del"
		for i := 0; i < 8; i++ { // all duplicates, bounded
			if _, err := r.Run(ctx, "", "ip", del...); err != nil {
				break
			}
		}
	}
}

func alreadyExists(err error) bool {
	var ce *CmdError
	return errors.As(err, &ce) && (strings.Contains(ce.Stderr, "File exists") || strings.Contains(ce.Stderr, "already assigned"))
}

// dedupRule deletes extra copies of an ip rule added more than once.
func dedupRule(ctx context.Context, r Runner, add []string) error {
	out, err := r.Run(ctx, "", "ip", add[0], "rule", "show")
	if err != nil {
		return err
	}
	needle := "fwmark " + add[4] + " lookup " + add[6]
	if m, err := strconv.ParseUint(add[4], 0, 32); err == nil {
		needle = "fwmark 0x" + strconv.FormatUint(m, 16) + " lookup " + add[6]
	}
	n := strings.Count(out, needle)
	del := append([]string(nil), add...)
	del[2] = "del"
	for ; n > 1; n-- {
		if _, err := r.Run(ctx, "", "ip", del...); err != nil {
			return err
		}
	}
	return nil
}
