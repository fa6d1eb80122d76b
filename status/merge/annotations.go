// Package merge serves the merged Prometheus endpoint: the agent's own metrics, Envoy's and the
// application's, streamed through a fixed buffer with a size and time bound per target.
package merge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Target is one application metrics endpoint on localhost.
type Target struct {
	Port int
	Path string
}

// reservedPorts are Istio's own ports; scraping one of them would loop or scrape the proxy.
var reservedPorts = map[int]bool{15000: true, 15001: true, 15004: true, 15006: true, 15008: true, 15020: true, 15021: true, 15053: true, 15090: true}

type rawScrape struct {
	Scrape  string          `json:"scrape"`
	Path    string          `json:"path"`
	Port    json.RawMessage `json:"port"`
	Targets []struct {
		Port json.RawMessage `json:"port"`
		Path string          `json:"path"`
	} `json:"targets"`
}

// ParseAnnotations decodes ISTIO_PROMETHEUS_ANNOTATIONS ({scrape, path, port, targets:[{port,
// path}]}, ports as strings or numbers). Empty input or scrape "false" means no application
// scraping. Path defaults to /metrics and port to 80; a port equal to statusPort or to one of
// Istio's reserved ports is rejected.
func ParseAnnotations(doc []byte, statusPort int) ([]Target, error) {
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 {
		return nil, nil
	}
	var raw rawScrape
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("prometheus annotations: invalid JSON: %w", err)
	}
	if raw.Scrape == "false" {
		return nil, nil
	}
	var out []Target
	add := func(what string, port json.RawMessage, path string) error {
		p, err := annotationPort(port)
		if err != nil {
			return fmt.Errorf("prometheus annotations: %s port: %w", what, err)
		}
		if p == statusPort || reservedPorts[p] {
			return fmt.Errorf("prometheus annotations: %s port %d is the agent's status port or an Istio-reserved port; scraping it would loop", what, p)
		}
		if path == "" {
			path = "/metrics"
		} else if path[0] != '/' {
			path = "/" + path
		}
		out = append(out, Target{Port: p, Path: path})
		return nil
	}
	if len(raw.Targets) == 0 {
		if err := add("scrape", raw.Port, raw.Path); err != nil {
			return nil, err
		}
		return out, nil
	}
	for i, t := range raw.Targets {
		if err := add(fmt.Sprintf("targets[%d]", i), t.Port, t.Path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func annotationPort(raw json.RawMessage) (int, error) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s == "null" || s == `""` {
		return 80, nil
	}
	if s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%s: %w", raw, err)
		}
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	return p, nil
}
