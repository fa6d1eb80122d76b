package supervisor

import (
	"bytes"
	"strconv"
	"strings"
)

// activeConnections sums the listener downstream_cx_active stats in Envoy's plain-text /stats
// output, the way Istio does: only "listener." stats, skipping per-worker lines, internal
// listeners (listener.envoy_internal_*), the admin listener and the agent's own listeners
// (excluded, full stat names). ok is false when the body holds no stat line at all, which Istio
// reads as "stats not available" and ends the drain on. Lines that do not parse are skipped.
func activeConnections(body []byte, excluded map[string]bool) (total uint64, ok bool) {
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		// The name may hold colons (IPv6 listener names), the value never does.
		i := bytes.LastIndexByte(line, ':')
		if i < 0 {
			continue
		}
		ok = true
		name := string(bytes.TrimSpace(line[:i]))
		if !strings.HasPrefix(name, "listener.") || strings.Contains(name, "worker_") ||
			strings.HasPrefix(name, "listener.envoy_internal_") || strings.HasPrefix(name, "listener.admin.") ||
			excluded[name] {
			continue
		}
		v, err := strconv.ParseUint(string(bytes.TrimSpace(line[i+1:])), 10, 64)
		if err != nil {
			continue
		}
		total += v
	}
	return total, ok
}

// excludedListeners names the downstream_cx_active stats of the agent-owned listeners on ports.
func excludedListeners(ports []int) map[string]bool {
	m := make(map[string]bool, 2*len(ports))
	for _, p := range ports {
		if p <= 0 {
			continue
		}
		m["listener.0.0.0.0_"+strconv.Itoa(p)+".downstream_cx_active"] = true
		// Envoy writes "::" as "__" in stat names.
		m["listener.[__]_"+strconv.Itoa(p)+".downstream_cx_active"] = true
	}
	return m
}
