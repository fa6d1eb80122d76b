package capture

import (
	"slices"
	"strconv"
	"strings"
)

// builtinChains are the kernel's own chains (never created or deleted).
var builtinChains = map[string]bool{
	"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true,
}

// ownChains returns, per table, the non-built-in chains the rules use (as a chain or a jump
// target), in first-use order.
func ownChains(rules []Rule) map[string][]string {
	out := map[string][]string{}
	seen := map[string]bool{}
	note := func(table, chain string) {
		if builtinChains[chain] || seen[table+"/"+chain] {
			return
		}
		seen[table+"/"+chain] = true
		out[table] = append(out[table], chain)
	}
	for _, r := range rules {
		note(r.Table, r.Chain)
	}
	for _, r := range rules {
		if t := jumpTarget(r.Args); strings.HasPrefix(t, "ISTIO_") {
			note(r.Table, t)
		}
	}
	return out
}

func jumpTarget(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-j" {
			return args[i+1]
		}
	}
	return ""
}

// ruleLine is a rule as iptables-restore and iptables take it after the table: -A CHAIN ... or
// -I CHAIN POS ....
func ruleLine(r Rule) []string {
	if r.Pos > 0 {
		return append([]string{"-I", r.Chain, strconv.Itoa(r.Pos)}, r.Args...)
	}
	return append([]string{"-A", r.Chain}, r.Args...)
}

// RestoreText renders rules as iptables-restore input for use with --noflush: per table (in
// name order) the chains to create, then the rules in order, then COMMIT. No rules, no text.
func RestoreText(rules []Rule) string {
	chains := ownChains(rules)
	byTable := map[string][]string{}
	for _, r := range rules {
		byTable[r.Table] = append(byTable[r.Table], strings.Join(ruleLine(r), " "))
	}
	for t := range chains {
		if _, ok := byTable[t]; !ok {
			byTable[t] = nil
		}
	}
	tables := make([]string, 0, len(byTable))
	for t := range byTable {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	var b strings.Builder
	for _, t := range tables {
		b.WriteString("*" + t + "\n")
		for _, c := range chains[t] {
			b.WriteString("-N " + c + "\n")
		}
		for _, l := range byTable[t] {
			b.WriteString(l + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// checkArgs is the iptables command line that checks a rule exists (-C, position dropped).
func checkArgs(r Rule) []string {
	return append([]string{"-t", r.Table, "-C", r.Chain}, r.Args...)
}

// deleteArgs is the iptables command line that deletes a rule by specification.
func deleteArgs(r Rule) []string {
	return append([]string{"-t", r.Table, "-D", r.Chain}, r.Args...)
}
