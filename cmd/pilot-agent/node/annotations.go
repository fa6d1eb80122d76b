package node

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ExcludeInterfacesAnnotation lists interfaces whose addresses are not the proxy's.
const ExcludeInterfacesAnnotation = "traffic.sidecar.istio.io/excludeInterfaces"

// ParseAnnotations reads a Kubernetes downward-API annotations file: one `key="quoted value"`
// per line, values quoted with Go-style escapes.
func ParseAnnotations(b []byte) (map[string]string, error) {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("annotations line %d: no '=' in %q", n, line)
		}
		u, err := strconv.Unquote(v)
		if err != nil {
			return nil, fmt.Errorf("annotations line %d: value of %s is not a quoted string: %w", n, k, err)
		}
		m[k] = u
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading annotations: %w", err)
	}
	return m, nil
}

// SplitList splits a comma-separated annotation value, dropping blanks.
func SplitList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
