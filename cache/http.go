package cache

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/klauspost/compress/gzip"
)

// httpFetcher downloads modules over http(s) with Istio's retry rules (pkg/wasm/httpfetcher.go):
// at most HTTPRequestMaxRetries attempts, each bounded by HTTPRequestTimeout, exponential
// backoff from 500ms between them, retrying transport errors and 5xx except 501, 505 and 511.
type httpFetcher struct {
	client, insecureClient *http.Client
	attempts               int
	backoff                time.Duration
	max                    int64
}

func newHTTPFetcher(o *Options, g *guard) *httpFetcher {
	mk := func(insecure bool) *http.Client {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = g.DialContext // every connection, redirects included, is checked
		if insecure {
			t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // #nosec G402: WASM_INSECURE_REGISTRIES
		}
		return &http.Client{Timeout: o.HTTPRequestTimeout, Transport: t}
	}
	return &httpFetcher{client: mk(false), insecureClient: mk(true), attempts: o.HTTPRequestMaxRetries,
		backoff: o.initialBackoff, max: o.MaxModuleBytes}
}

func (f *httpFetcher) fetch(ctx context.Context, url string, insecure bool) ([]byte, error) {
	c := f.client
	if insecure {
		c = f.insecureClient
	}
	delay := f.backoff
	var last error
	attempts := 0
	for attempts < f.attempts {
		if attempts > 0 {
			// Jittered exponential backoff (±50%, ×1.5), as cenkalti/backoff's defaults.
			wait := time.Duration(float64(delay) * (0.5 + rand.Float64()))
			delay = min(delay*3/2, 60*time.Second)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, fmt.Errorf("wasm module download failed after %v attempts, last error: %w", attempts, last)
			}
		}
		attempts++
		b, retry, err := f.once(ctx, c, url)
		if err == nil {
			return b, nil
		}
		last = err
		if !retry || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("wasm module download failed after %v attempts, last error: %w", attempts, last)
}

// errTooLarge marks a module over MaxModuleBytes: never retried.
var errTooLarge = errors.New("wasm module too large")

func (f *httpFetcher) once(ctx context.Context, c *http.Client, url string) (b []byte, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, true, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, retryable(resp.StatusCode), fmt.Errorf("wasm module download request failed: status code %v", resp.StatusCode)
	}
	if resp.ContentLength > f.max {
		return nil, false, fmt.Errorf("%w: %s is %d bytes, limit %d", errTooLarge, url, resp.ContentLength, f.max)
	}
	b, err = readCapped(resp.Body, f.max)
	if err != nil {
		return nil, !errors.Is(err, errTooLarge), err
	}
	b, err = unbox(b, f.max)
	return b, false, err
}

func retryable(code int) bool {
	return code >= 500 && code != http.StatusNotImplemented && code != http.StatusHTTPVersionNotSupported &&
		code != http.StatusNetworkAuthenticationRequired
}

// readCapped reads r whole, failing once it passes max bytes.
func readCapped(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, max)
	}
	return b, nil
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	tarMagic  = []byte("ustar")
)

// unbox unwraps a gzip stream or a tar archive (its first file) around the module, as Istio's
// unboxIfPossible, each layer capped at max bytes. Bytes that are none of these are returned as
// they are (the Wasm header check comes later).
func unbox(b []byte, max int64) ([]byte, error) {
	for range 8 {
		switch {
		case isWasm(b):
			return b, nil
		case len(b) > 2 && bytes.Equal(b[:2], gzipMagic):
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return b, nil
			}
			nb, err := readCapped(zr, max)
			if errors.Is(err, errTooLarge) {
				return nil, err
			}
			if err != nil {
				return b, nil
			}
			b = nb
		case len(b) > 262 && bytes.Equal(b[257:262], tarMagic):
			tr := tar.NewReader(bytes.NewReader(b))
			h, err := tr.Next()
			if err != nil {
				return b, nil
			}
			if h.Size > max {
				return nil, fmt.Errorf("%w: archived module is %d bytes, limit %d", errTooLarge, h.Size, max)
			}
			nb, err := readCapped(tr, max)
			if err != nil {
				return b, nil
			}
			b = nb
		default:
			return b, nil
		}
	}
	return b, nil
}
