package status

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// readyStatsFilter selects, in one admin request, the six stats readiness needs (Istio makes
// two requests; the answer is the same).
const readyStatsFilter = `^(server\.state|listener_manager\.workers_started|` +
	`(cluster_manager\.cds|listener_manager\.lds)\.update_(success|rejected))$`

// maxStatsBody bounds what is read of the admin answer (six short lines are expected).
const maxStatsBody = 16 << 10

// envoyStats holds the values readiness reads; a stat absent from the answer (Envoy lists
// only used stats) is zero and not found.
type envoyStats struct {
	cdsSuccess, cdsRejected, ldsSuccess, ldsRejected uint64
	state, workersStarted                            uint64
	stateFound, workersFound                         bool
}

// readinessStats is what Istio's readiness query (server.state and
// listener_manager.workers_started) would have answered, for its "not yet updated" reasons.
func (s *envoyStats) readinessStats() string {
	var b []byte
	if s.workersFound {
		b = fmt.Appendf(b, "listener_manager.workers_started: %d\n", s.workersStarted)
	}
	if s.stateFound {
		b = fmt.Appendf(b, "server.state: %d\n", s.state)
	}
	return string(b)
}

func (s *envoyStats) String() string {
	return fmt.Sprintf("cds updates: %d successful, %d rejected; lds updates: %d successful, %d rejected",
		s.cdsSuccess, s.cdsRejected, s.ldsSuccess, s.ldsRejected)
}

// adminClient reads Envoy's admin stats. Immutable after newAdminClient.
type adminClient struct {
	url     string
	client  *http.Client
	timeout time.Duration
}

func newAdminClient(host string, port int, timeout time.Duration) *adminClient {
	return &adminClient{
		url: "http://" + net.JoinHostPort(host, strconv.Itoa(port)) +
			"/stats?usedonly&filter=" + url.QueryEscape(readyStatsFilter),
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: timeout}).DialContext,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     30 * time.Second,
		}},
		timeout: timeout,
	}
}

// statsBufPool holds the admin answer while it is parsed (readiness is polled by kubelet
// and Envoy's 15021 listener concurrently).
var statsBufPool = sync.Pool{New: func() any { return new([maxStatsBody]byte) }}

// fetch reads and parses the readiness stats.
func (a *adminClient) fetch(ctx context.Context) (envoyStats, error) {
	var st envoyStats
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	if err != nil {
		return st, fmt.Errorf("envoy admin stats request %s: %w", a.url, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return st, err // as Istio's pkg/http request (1.30.3): `Get "<url>": <cause>`
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("unexpected status %d", resp.StatusCode) // Istio's pkg/http request
	}
	buf := statsBufPool.Get().(*[maxStatsBody]byte)
	defer statsBufPool.Put(buf)
	n, err := io.ReadFull(resp.Body, buf[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return st, fmt.Errorf("envoy admin stats body: %w", err)
	}
	if err := parseEnvoyStats(buf[:n], &st); err != nil {
		return st, err
	}
	return st, nil
}

// parseEnvoyStats reads "name: value" lines, ignoring stats it does not know.
func parseEnvoyStats(body []byte, st *envoyStats) error {
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *uint64
		switch string(name) { // no allocation: the compiler compares in place
		case "cluster_manager.cds.update_success":
			dst = &st.cdsSuccess
		case "cluster_manager.cds.update_rejected":
			dst = &st.cdsRejected
		case "listener_manager.lds.update_success":
			dst = &st.ldsSuccess
		case "listener_manager.lds.update_rejected":
			dst = &st.ldsRejected
		case "server.state":
			dst, st.stateFound = &st.state, true
		case "listener_manager.workers_started":
			dst, st.workersFound = &st.workersStarted, true
		default:
			continue
		}
		v, err := parseUint(bytes.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("envoy stat %s: value %q: %w", name, val, err)
		}
		*dst = v
	}
	return nil
}

func parseUint(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 19 {
		return 0, strconv.ErrSyntax
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
		v = v*10 + uint64(c-'0')
	}
	return v, nil
}

// serverStateName is Envoy's admin.v3.ServerInfo.State.
func serverStateName(s uint64) string {
	switch s {
	case 0:
		return "LIVE"
	case 1:
		return "DRAINING"
	case 2:
		return "PRE_INITIALIZING"
	case 3:
		return "INITIALIZING"
	}
	return strconv.FormatUint(s, 10)
}
