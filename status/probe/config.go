// Package probe rewrites Kubernetes application probes: it parses the injector's
// ISTIO_KUBE_APP_PROBERS document and answers /app-health/<container>/{livez,readyz,startupz} and
// /app-lifecycle/<container>/{prestopz,poststartz} by running the original httpGet, tcpSocket or
// grpc action against the application with kubelet's semantics.
package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Action is one parsed probe or lifecycle hook. Immutable after Parse.
type Action struct {
	// Path is the status-server path this action answers, e.g. "/app-health/app/readyz".
	Path string
	// Container is the container name taken from Path.
	Container string
	// Exactly one of HTTP, TCP and GRPC is set.
	HTTP *HTTPGet
	TCP  *TCPSocket
	GRPC *GRPC
	// TimeoutSeconds is the probe's timeoutSeconds (0 when unset; the prober then uses
	// Kubernetes' default of one second).
	TimeoutSeconds int
}

// HTTPGet is Kubernetes' httpGet action.
type HTTPGet struct {
	Path    string
	Port    int
	HTTPS   bool // scheme HTTPS
	Headers []Header
}

// Header is one httpHeaders entry.
type Header struct{ Name, Value string }

// TCPSocket is Kubernetes' tcpSocket action.
type TCPSocket struct {
	Port int
}

// GRPC is Kubernetes' grpc action.
type GRPC struct {
	Port    int
	Service string
}

// The JSON shapes written by the injector (Kubernetes field names).
type rawAction struct {
	HTTPGet *struct {
		Path        string          `json:"path"`
		Port        json.RawMessage `json:"port"`
		Host        string          `json:"host"`
		Scheme      string          `json:"scheme"`
		HTTPHeaders []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"httpHeaders"`
	} `json:"httpGet"`
	TCPSocket *struct {
		Port json.RawMessage `json:"port"`
		Host string          `json:"host"`
	} `json:"tcpSocket"`
	GRPC *struct {
		Port    json.RawMessage `json:"port"`
		Service *string         `json:"service"`
	} `json:"grpc"`
	TimeoutSeconds int `json:"timeoutSeconds"`
}

// Parse decodes an ISTIO_KUBE_APP_PROBERS document: a JSON object mapping status paths to
// probe actions. Empty input means no probes. Every error names the path and container at fault.
func Parse(doc []byte) (map[string]*Action, error) {
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 {
		return map[string]*Action{}, nil
	}
	var raw map[string]*rawAction
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("app probers: invalid JSON: %w", err)
	}
	out := make(map[string]*Action, len(raw))
	for path, ra := range raw {
		a, err := parseAction(path, ra)
		if err != nil {
			return nil, err
		}
		out[path] = a
	}
	return out, nil
}

// ContainerOf splits a probe path into its container and check, reporting whether the path has
// one of the accepted forms.
func ContainerOf(path string) (container, check string, ok bool) {
	var rest string
	var checks []string
	switch {
	case strings.HasPrefix(path, "/app-health/"):
		rest, checks = path[len("/app-health/"):], []string{"livez", "readyz", "startupz"}
	case strings.HasPrefix(path, "/app-lifecycle/"):
		rest, checks = path[len("/app-lifecycle/"):], []string{"prestopz", "poststartz"}
	default:
		return "", "", false
	}
	i := strings.IndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	container, check = rest[:i], rest[i+1:]
	for _, c := range checks {
		if check == c {
			return container, check, true
		}
	}
	return "", "", false
}

func parseAction(path string, ra *rawAction) (*Action, error) {
	container, _, ok := ContainerOf(path)
	if !ok {
		return nil, fmt.Errorf("app probers: path %q: must be /app-health/<container>/{livez,readyz,startupz} or /app-lifecycle/<container>/{prestopz,poststartz}", path)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("app probers: container %q, probe %q: %s", container, path, fmt.Sprintf(format, args...))
	}
	if ra == nil {
		return nil, fail("probe is null")
	}
	n := 0
	for _, set := range []bool{ra.HTTPGet != nil, ra.TCPSocket != nil, ra.GRPC != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fail("exactly one of httpGet, tcpSocket or grpc must be set, found %d", n)
	}
	if ra.TimeoutSeconds < 0 {
		return nil, fail("timeoutSeconds %d is negative", ra.TimeoutSeconds)
	}
	a := &Action{Path: path, Container: container, TimeoutSeconds: ra.TimeoutSeconds}
	switch {
	case ra.HTTPGet != nil:
		h := ra.HTTPGet
		port, err := parsePort(h.Port)
		if err != nil {
			return nil, fail("httpGet.port: %v", err)
		}
		// httpGet.host is not used: Istio's handleAppProbeHTTPGet always probes the pod IP
		// (or localhost, REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION).
		g := &HTTPGet{Path: h.Path, Port: port}
		if !strings.HasPrefix(g.Path, "/") {
			g.Path = "/" + g.Path
		}
		switch strings.ToUpper(h.Scheme) {
		case "", "HTTP":
		case "HTTPS":
			g.HTTPS = true
		default:
			return nil, fail("httpGet.scheme %q is neither HTTP nor HTTPS", h.Scheme)
		}
		for _, hd := range h.HTTPHeaders {
			if hd.Name == "" {
				return nil, fail("httpGet.httpHeaders has an entry with an empty name")
			}
			g.Headers = append(g.Headers, Header{Name: hd.Name, Value: hd.Value})
		}
		a.HTTP = g
	case ra.TCPSocket != nil:
		port, err := parsePort(ra.TCPSocket.Port)
		if err != nil {
			return nil, fail("tcpSocket.port: %v", err)
		}
		a.TCP = &TCPSocket{Port: port} // tcpSocket.host is not used, as in Istio's handleAppProbeTCPSocket
	default:
		port, err := parsePort(ra.GRPC.Port)
		if err != nil {
			return nil, fail("grpc.port: %v", err)
		}
		g := &GRPC{Port: port}
		if ra.GRPC.Service != nil {
			g.Service = *ra.GRPC.Service
		}
		a.GRPC = g
	}
	return a, nil
}

var errNamedPort = errors.New("must be a number (named ports are resolved by the injector)")

// parsePort accepts a JSON integer in 1..65535. Like Istio, a string (a named port, or an
// int-or-string holding a string) is rejected.
func parsePort(raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, errors.New("missing")
	}
	if raw[0] == '"' {
		return 0, fmt.Errorf("%s %w", raw, errNamedPort)
	}
	p, err := strconv.Atoi(string(raw))
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer", raw)
	}
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("%d is out of range 1-65535", p)
	}
	return p, nil
}
