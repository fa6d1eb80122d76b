package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// maxProbeBody is how much of the application's response body is relayed (kubelet reads 10 KiB).
const maxProbeBody = 10 << 10

// maxRedirects is kubelet's limit on same-host redirects.
const maxRedirects = 10

// hopHeaders are not forwarded from kubelet's request to the application.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Accept-Encoding",
}

// httpProbe runs one httpGet action. Immutable after newHTTPProbe.
type httpProbe struct {
	action     *Action
	url        string // scheme://host:port/path, built once
	port       string // the probed port, for rewriting a Host header that names the status port
	statusPort string
	client     *http.Client // cached per path, like Istio
	log        *slog.Logger
}

func newHTTPProbe(a *Action, cfg Config, d dialer) *httpProbe {
	g := a.HTTP
	scheme := "http"
	if g.HTTPS {
		scheme = "https"
	}
	port := strconv.Itoa(g.Port)
	t := &http.Transport{
		DialContext:         d.DialContext,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet does not verify probe certificates either
		DisableKeepAlives:   !cfg.KeepAlive,
		TLSHandshakeTimeout: timeoutOf(a),
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
	}
	if g.HTTPS && !cfg.DisableHTTP2 {
		t.ForceAttemptHTTP2 = true
		t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second}
	} else {
		var p http.Protocols
		p.SetHTTP1(true)
		t.Protocols = &p
	}
	return &httpProbe{
		action:     a,
		url:        scheme + "://" + net.JoinHostPort(cfg.TargetHost, port) + g.Path,
		port:       port,
		statusPort: strconv.Itoa(cfg.StatusPort),
		client: &http.Client{
			Transport:     t,
			Timeout:       timeoutOf(a),
			CheckRedirect: sameHostRedirects,
		},
		log: cfg.Logger,
	}
}

// sameHostRedirects follows redirects to the same host (up to 10) and stops at a redirect to
// another host, whose 3xx then counts as success: kubelet's rule.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

func (p *httpProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeoutOf(p.action))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		http.Error(w, "probe request: "+err.Error(), http.StatusInternalServerError)
		return
	}
	// kubelet's own headers (User-Agent, Accept, and the probe's httpHeaders) are forwarded.
	for k, v := range r.Header {
		req.Header[k] = v
	}
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	for _, h := range p.action.HTTP.Headers {
		if req.Header.Get(h.Name) == "" {
			req.Header.Set(h.Name, h.Value)
		}
	}
	if hv := req.Header.Get("Host"); hv != "" {
		req.Host = hv
		req.Header.Del("Host")
	} else if r.Host != "" {
		req.Host = r.Host
		if host, port, err := net.SplitHostPort(r.Host); err == nil && port == p.statusPort {
			req.Host = net.JoinHostPort(host, p.port)
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// Istio's line and level (pilot/cmd/pilot-agent/status/server.go handleAppProbeHTTPGet at 1.30.3).
		p.log.Error(fmt.Sprintf("Request to probe app failed: %v, original URL path = %v\napp URL path = %v", err, p.action.Path, p.action.HTTP.Path))
		http.Error(w, "probe failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer resp.Body.Close()
	code := resp.StatusCode
	if code >= 300 && code < 400 {
		code = http.StatusOK // a final redirect (to another host) is a success for kubelet
	}
	w.WriteHeader(code)
	if _, err := io.Copy(w, io.LimitReader(resp.Body, maxProbeBody)); err != nil {
		p.log.Debug("app probe body", "path", p.action.Path, "error", err)
	}
}
