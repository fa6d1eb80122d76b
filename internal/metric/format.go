package metric

import (
	"bufio"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// renderLabels renders label pairs (name, value, ...) as {a="x",b="y"}, in the order given;
// none renders as "".
func renderLabels(pairs []string) string {
	if len(pairs) == 0 {
		return ""
	}
	if len(pairs)%2 != 0 {
		panic(fmt.Sprintf("metric: odd label list %q", pairs))
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		checkLabelName(pairs[i])
		b.WriteString(pairs[i])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(pairs[i+1]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// withLabel adds one more pair to rendered labels (for histogram buckets).
func withLabel(labels, name, value string) string {
	pair := name + `="` + escapeLabel(value) + `"`
	if labels == "" {
		return "{" + pair + "}"
	}
	return labels[:len(labels)-1] + "," + pair + "}"
}

func checkLabelName(name string) {
	for i, c := range name {
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		panic(fmt.Sprintf("metric: invalid label name %q", name))
	}
	if name == "" || strings.HasPrefix(name, "__") {
		panic(fmt.Sprintf("metric: invalid label name %q", name))
	}
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(v string) string { return labelEscaper.Replace(v) }
func escapeHelp(v string) string  { return helpEscaper.Replace(v) }

// writeFloat writes v as Prometheus' text format does (Go's shortest 'g' form, +Inf, -Inf, NaN).
func writeFloat(w *bufio.Writer, v float64) {
	switch {
	case math.IsInf(v, +1):
		w.WriteString("+Inf")
	case math.IsInf(v, -1):
		w.WriteString("-Inf")
	case math.IsNaN(v):
		w.WriteString("NaN")
	default:
		var buf [32]byte
		w.Write(strconv.AppendFloat(buf[:0], v, 'g', -1, 64))
	}
}
