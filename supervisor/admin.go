package supervisor

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
)

// maxStatsBody caps what is read from /stats; the filtered output is a few lines per listener.
const maxStatsBody = 4 << 20

// adminClient talks to Envoy's admin API. Immutable after construction.
type adminClient struct {
	base   string // http://host:port
	client *http.Client
}

func newAdminClient(host string, port int) *adminClient {
	return &adminClient{
		base: "http://" + net.JoinHostPort(host, strconv.Itoa(port)),
		// A private transport so that Close can drop its idle connections.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}},
	}
}

// drainListeners POSTs /drain_listeners?graceful[&inboundonly][&skip_exit].
func (a *adminClient) drainListeners(ctx context.Context, inboundOnly, skipExit bool) error {
	path := "/drain_listeners?graceful"
	if inboundOnly {
		path += "&inboundonly"
	}
	if skipExit {
		path += "&skip_exit"
	}
	_, err := a.do(ctx, http.MethodPost, path)
	return err
}

// stats GETs Envoy's active downstream connection stats.
func (a *adminClient) stats(ctx context.Context) ([]byte, error) {
	return a.do(ctx, http.MethodGet, "/stats?usedonly&filter=downstream_cx_active$")
}

func (a *adminClient) do(ctx context.Context, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("envoy admin %s %s: %w", method, path, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("envoy admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatsBody))
	if err != nil {
		return nil, fmt.Errorf("envoy admin %s %s: reading body: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("envoy admin %s %s: status %d", method, path, resp.StatusCode)
	}
	return body, nil
}

func (a *adminClient) close() { a.client.CloseIdleConnections() }
