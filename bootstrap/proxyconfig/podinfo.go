package proxyconfig

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ReadPodInfoFile reads a Kubernetes downward-API file (./etc/istio/pod/labels or .../annotations):
// one `key="go-quoted value"` a line. Errors name the file and line.
func ReadPodInfoFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pod info file %s: %w", path, err)
	}
	m, err := ParsePodInfo(data)
	if err != nil {
		return nil, fmt.Errorf("pod info file %s: %w", path, err)
	}
	return m, nil
}

// ParsePodInfo parses downward-API `key="value"` lines. Blank lines are skipped.
func ParsePodInfo(data []byte) (map[string]string, error) {
	out := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20) // grows from 4 KiB as lines need: most pods' files are far smaller than 64 KiB
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		key, quoted, ok := strings.Cut(text, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("line %d: want key=\"value\", got %q", line, truncate(text))
		}
		val, err := strconv.Unquote(quoted)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %s: value %s is not a quoted string: %w", line, key, truncate(quoted), err)
		}
		out[key] = val
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return out, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
