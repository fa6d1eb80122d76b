package capture

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Native nftables (Istio's NATIVE_NFTABLES, tools/istio-nftables): the same capture as the
// iptables plan, in three tables of the inet family owned by the capture alone, so nothing in
// the kernel's shared tables is touched and clean-up deletes whole tables. Each run replaces the
// tables in one nft transaction (add, delete, add again, then chains and rules), so it is
// atomic and a re-run is idempotent. The nft CLI is used (it ships with Debian's nftables, as
// iptables ships with iptables): no netlink library is needed.

// nftTable names the table holding one iptables table's rules, with its base chains
// (Istio's hooks and priorities: nat at dstnat, mangle at mangle with a route-type output chain,
// raw at raw).
type nftTable struct {
	name  string
	bases map[string]string // base chain -> its declaration
}

// Table and chain names are Istio's (tools/istio-nftables/pkg/constants/constants.go:
// IstioProxyNatTable "istio-proxy-nat", IstioProxyMangleTable "istio-proxy-mangle",
// IstioProxyRawTable "istio-proxy-raw", base chains PreroutingChain "prerouting" and
// OutputChain "output", Istio's own chains lower case with hyphens, e.g. IstioInboundChain
// "istio-inbound", IstioOutputDNSChain "istio-output-dns"), so a pod captured by either agent
// shows the same tables and either agent's clean-up removes them.
var nftTables = map[string]nftTable{
	"nat": {"istio-proxy-nat", map[string]string{
		"PREROUTING": "type nat hook prerouting priority dstnat; policy accept;",
		"OUTPUT":     "type nat hook output priority -100; policy accept;",
	}},
	"mangle": {"istio-proxy-mangle", map[string]string{
		"PREROUTING": "type filter hook prerouting priority mangle; policy accept;",
		"OUTPUT":     "type route hook output priority mangle; policy accept;",
	}},
	"raw": {"istio-proxy-raw", map[string]string{
		"PREROUTING": "type filter hook prerouting priority raw; policy accept;",
		"OUTPUT":     "type filter hook output priority raw; policy accept;",
	}},
}

// nftChainName is the nft name of a plan chain: the base chains PREROUTING and OUTPUT become
// "prerouting" and "output", ISTIO_IN_REDIRECT becomes "istio-in-redirect" (Istio's
// constants.go spells every chain so).
func nftChainName(c string) string {
	return strings.ReplaceAll(strings.ToLower(c), "_", "-")
}

// NftTables returns the names of the tables the capture owns.
func NftTables(*Config) []string {
	return []string{"istio-proxy-mangle", "istio-proxy-nat", "istio-proxy-raw"}
}

// nftChain is one chain's final rule list (inserts resolved).
type nftChain struct {
	table, chain string
	rules        []string
}

// nftLayout resolves the plan's appends and inserts into final per-chain rule lists, each rule
// restricted to its family (meta nfproto): a packet sees only its own family's rules, in the
// order iptables would have them.
func nftLayout(cfg *Config) ([]nftChain, error) {
	plan := Build(cfg)
	var order []string
	chains := map[string]*nftChain{}
	for _, v6 := range []bool{false, true} {
		perFam := map[string][]string{}
		for _, r := range plan.Of(v6) {
			expr, err := nftRule(r.Args, v6)
			if err != nil {
				return nil, fmt.Errorf("rule -t %s %s: %w", r.Table, strings.Join(ruleLine(r), " "), err)
			}
			key := r.Table + "/" + r.Chain
			if _, ok := chains[key]; !ok {
				chains[key] = &nftChain{table: r.Table, chain: r.Chain}
				order = append(order, key)
			}
			l := perFam[key]
			if r.Pos > 0 && r.Pos <= len(l) {
				l = slices.Insert(l, r.Pos-1, expr)
			} else {
				l = append(l, expr)
			}
			perFam[key] = l
		}
		for k, l := range perFam {
			chains[k].rules = append(chains[k].rules, l...)
		}
	}
	// Chains only jumped to exist too.
	for t, cs := range ownChains(append(append([]Rule(nil), plan.V4...), plan.V6...)) {
		for _, c := range cs {
			if _, ok := chains[t+"/"+c]; !ok {
				chains[t+"/"+c] = &nftChain{table: t, chain: c}
				order = append(order, t+"/"+c)
			}
		}
	}
	out := make([]nftChain, 0, len(order))
	for _, k := range order {
		out = append(out, *chains[k])
	}
	return out, nil
}

// NftScript is the nft -f input that installs the capture (empty tables are not created).
func NftScript(cfg *Config) string {
	s, err := nftScript(cfg)
	if err != nil {
		return "# " + err.Error() + "\n"
	}
	return s
}

func nftScript(cfg *Config) (string, error) {
	layout, err := nftLayout(cfg)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, t := range []string{"mangle", "nat", "raw"} {
		tbl := nftTables[t]
		var mine []nftChain
		n := 0
		for _, c := range layout {
			if c.table == t {
				mine = append(mine, c)
				n += len(c.rules)
			}
		}
		fmt.Fprintf(&b, "add table inet %s\ndelete table inet %[1]s\n", tbl.name)
		if n == 0 {
			continue
		}
		fmt.Fprintf(&b, "add table inet %s\n", tbl.name)
		for _, c := range mine {
			if decl, ok := tbl.bases[c.chain]; ok {
				fmt.Fprintf(&b, "add chain inet %s %s { %s }\n", tbl.name, nftChainName(c.chain), decl)
			} else {
				fmt.Fprintf(&b, "add chain inet %s %s\n", tbl.name, nftChainName(c.chain))
			}
		}
		for _, c := range mine {
			for _, r := range c.rules {
				fmt.Fprintf(&b, "add rule inet %s %s %s\n", tbl.name, nftChainName(c.chain), r)
			}
		}
	}
	return b.String(), nil
}

// NftCleanupScript deletes the capture's tables (a missing table is fine).
func NftCleanupScript(tables []string) string {
	var b strings.Builder
	for _, t := range tables {
		fmt.Fprintf(&b, "add table inet %s\ndelete table inet %[1]s\n", t)
	}
	return b.String()
}

func (o *Options) runNft(ctx context.Context) error {
	cfg := &o.Config
	if o.CleanupOnly {
		RemoveRoutes(ctx, o.Runner, cfg)
		_, err := o.Runner.Run(ctx, NftCleanupScript(NftTables(cfg)), "nft", "-f", "-")
		return err
	}
	script, err := nftScript(cfg)
	if err != nil {
		return err
	}
	o.Log.Info("applying native nftables", "tables", strings.Join(NftTables(cfg), ","))
	if _, err := o.Runner.Run(ctx, script, "nft", "-f", "-"); err != nil {
		return err
	}
	// Verify: every table holds the planned number of rules.
	layout, _ := nftLayout(cfg)
	for _, t := range []string{"mangle", "nat", "raw"} {
		want := 0
		for _, c := range layout {
			if c.table == t {
				want += len(c.rules)
			}
		}
		if want == 0 {
			continue
		}
		out, err := o.Runner.Run(ctx, "", "nft", "list", "table", "inet", nftTables[t].name)
		if err != nil {
			return fmt.Errorf("verifying %s: %w", nftTables[t].name, err)
		}
		if got := strings.Count(out, " counter "); got != want {
			return fmt.Errorf("verifying %s: %d rules in the kernel, want %d", nftTables[t].name, got, want)
		}
	}
	return ConfigureRoutes(ctx, o.Runner, cfg)
}

// nftRule translates one rule of the plan (iptables arguments) into an nft rule for one family.
func nftRule(args []string, v6 bool) (string, error) {
	ipf, fam := "ip", "ipv4"
	if v6 {
		ipf, fam = "ip6", "ipv6"
	}
	out := []string{"meta nfproto " + fam}
	neg, proto, module := false, "", ""
	op := func() string {
		if neg {
			neg = false
			return "!= "
		}
		return ""
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s without a value", a)
			}
			i++
			return args[i], nil
		}
		v := ""
		if a != "!" && a != "-j" {
			var err error
			if v, err = next(); err != nil {
				return "", err
			}
		}
		switch a {
		case "!":
			neg = true
		case "-p":
			proto = v
			out = append(out, "meta l4proto "+v)
		case "--dport", "--sport":
			out = append(out, fmt.Sprintf("%s %s %s%s", proto, a[2:], op(), strings.ReplaceAll(v, ":", "-")))
		case "--dports":
			out = append(out, fmt.Sprintf("%s dport %s{ %s }", proto, op(), strings.ReplaceAll(v, ",", ", ")))
		case "-d", "-s":
			dir := map[string]string{"-d": "daddr", "-s": "saddr"}[a]
			out = append(out, fmt.Sprintf("%s %s %s%s", ipf, dir, op(), v))
		case "-i", "-o":
			dir := map[string]string{"-i": "iifname", "-o": "oifname"}[a]
			out = append(out, fmt.Sprintf("%s %s%q", dir, op(), v))
		case "-m":
			module = v
		case "--uid-owner", "--gid-owner":
			out = append(out, fmt.Sprintf("meta sk%sid %s%s", a[2:3], op(), v))
		case "--ctstate":
			out = append(out, "ct state "+op()+strings.ToLower(v))
		case "--mark":
			what := "meta mark"
			if module == "connmark" {
				what = "ct mark"
			}
			out = append(out, what+" "+op()+v)
		case "-j":
			t, err := nftTarget(args[i+1:], ipf)
			if err != nil {
				return "", err
			}
			return strings.Join(append(out, "counter", t), " "), nil
		default:
			return "", fmt.Errorf("no nftables translation for %s", a)
		}
	}
	return "", fmt.Errorf("rule without a target")
}

func nftTarget(t []string, ipf string) (string, error) {
	if len(t) == 0 {
		return "", fmt.Errorf("-j without a target")
	}
	opt := func(name string) string {
		for i := 1; i+1 < len(t); i++ {
			if t[i] == name {
				return t[i+1]
			}
		}
		return ""
	}
	switch t[0] {
	case "RETURN":
		return "return", nil
	case "ACCEPT":
		return "accept", nil
	case "DROP":
		return "drop", nil
	case "REDIRECT":
		return "redirect to :" + opt("--to-ports"), nil
	case "TPROXY":
		mark, _, _ := strings.Cut(opt("--tproxy-mark"), "/")
		return fmt.Sprintf("meta mark set %s tproxy %s to :%s accept", mark, ipf, opt("--on-port")), nil
	case "MARK":
		return "meta mark set " + opt("--set-mark"), nil
	case "CONNMARK":
		if slices.Contains(t, "--save-mark") {
			return "ct mark set meta mark", nil
		}
		return "meta mark set ct mark", nil
	case "CT":
		return "ct zone set " + opt("--zone"), nil
	}
	if strings.HasPrefix(t[0], "ISTIO_") {
		return "jump " + nftChainName(t[0]), nil
	}
	return "", fmt.Errorf("no nftables translation for target %s", t[0])
}
