package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"

	"github.com/wingman-mesh/wingman/transport/h2grpc"
)

// Header is one HTTP request header of an HTTP probe.
type Header struct{ Name, Value string }

// HTTPGet is an HTTP probe: healthy on a status in [200, 400).
type HTTPGet struct {
	Scheme, Host, Path string // defaults http, localhost, "/"
	Port               int
	Headers            []Header
	// LocalAddr is the source address (Istio uses 127.0.0.6, or ::6 with IPv6, so the request
	// is not captured as the application's own outbound traffic); nil lets the system choose.
	LocalAddr *net.TCPAddr
}

// NewHTTPProber returns the prober for h (a fresh connection per probe, no keep-alive; TLS
// certificates are not verified, as Istio's agent and kubelet do).
func NewHTTPProber(h HTTPGet) Prober {
	if h.Path == "" {
		h.Path = "/"
	}
	h.Scheme = strings.ToLower(h.Scheme)
	if h.Scheme == "" {
		h.Scheme = "http"
	}
	if h.Host == "" {
		h.Host = "localhost"
	}
	d := &net.Dialer{}
	if h.LocalAddr != nil {
		d.LocalAddr = h.LocalAddr
	}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}
	if h.Scheme == "https" {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // probes do not verify, as kubelet
	}
	client := &http.Client{Transport: tr}
	target, err := url.Parse(h.Path)
	if err != nil {
		target = &url.URL{Path: h.Path} // passed along as is, as Istio does
	}
	target.Scheme, target.Host = h.Scheme, net.JoinHostPort(h.Host, strconv.Itoa(h.Port))
	return ProberFunc(func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
		if err != nil {
			return err
		}
		for _, hd := range h.Headers {
			req.Header.Add(hd.Name, hd.Value)
		}
		if v := req.Header.Get("Host"); v != "" {
			req.Host = v
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header.Set("User-Agent", "istio-probe/1.0")
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
			return fmt.Errorf("status code was not from [200,400), bad code %d", resp.StatusCode)
		}
		return nil
	})
}

// NewTCPProber is healthy when a TCP connection to host:port opens.
func NewTCPProber(host string, port int) Prober {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	return ProberFunc(func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// NewExecProber is healthy when command exits 0 within the timeout.
func NewExecProber(command []string) (Prober, error) {
	if len(command) == 0 || command[0] == "" {
		return nil, errors.New("exec probe: empty command")
	}
	return ProberFunc(func(ctx context.Context) error {
		err := exec.CommandContext(ctx, command[0], command[1:]...).Run()
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("command timeout exceeded: %w", err)
		}
		return err
	}), nil
}

// NewGRPCProber is healthy when grpc.health.v1.Health/Check on localhost:port answers SERVING
// for service, over plaintext HTTP/2 on a fresh connection per probe.
func NewGRPCProber(port int, service string) Prober {
	addr := net.JoinHostPort("localhost", strconv.Itoa(port))
	return ProberFunc(func(ctx context.Context) error {
		c, err := h2grpc.NewClient(h2grpc.ClientConfig{Address: addr})
		if err != nil {
			return err
		}
		defer c.Close()
		s, err := c.HealthCheck(ctx, service)
		if err != nil {
			return err
		}
		if s != h2grpc.HealthServing {
			return fmt.Errorf("grpc health of %q is %s", service, s)
		}
		return nil
	})
}
