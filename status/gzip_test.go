package status

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// gzipGet serves h on a real server and requests it with the given Accept-Encoding, reading
// the raw (not transparently decompressed) response.
func gzipGet(t *testing.T, h http.Handler, method, acceptEncoding string) (*http.Response, []byte) {
	t.Helper()
	srv := httptest.NewServer(gzipHandler(h))
	defer srv.Close()
	req, _ := http.NewRequest(method, srv.URL, nil)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("bad gzip stream: %v", err)
	}
	return out
}

var metricsBody = strings.Repeat("envoy_cluster_upstream_rq_total{cluster_name=\"outbound|80||a.b.svc.cluster.local\"} 12\n", 200)

// writeInPieces writes body in small writes, as the metrics merger does line by line.
func writeInPieces(code int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if code != 0 {
			w.WriteHeader(code)
		}
		for len(body) > 0 {
			n := min(100, len(body))
			io.WriteString(w, body[:n])
			body = body[n:]
		}
	})
}

func TestGzipCompressesLargeBodies(t *testing.T) {
	for _, ae := range []string{"gzip", "gzip, deflate", "deflate, gzip;q=0.5", "*", "GZIP", "br;q=1.0, x-gzip"} {
		resp, body := gzipGet(t, writeInPieces(0, metricsBody), http.MethodGet, ae)
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want gzip", ae, resp.Header.Get("Content-Encoding"))
			continue
		}
		if got := string(gunzip(t, body)); got != metricsBody {
			t.Errorf("Accept-Encoding %q: decompressed body differs (%d bytes, want %d)", ae, len(got), len(metricsBody))
		}
		if len(body) > len(metricsBody)/4 {
			t.Errorf("compressed %d bytes to %d", len(metricsBody), len(body))
		}
		if resp.Header.Get("Vary") != "Accept-Encoding" || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4" {
			t.Errorf("headers %v", resp.Header)
		}
	}
}

func TestGzipLeavesAlone(t *testing.T) {
	gzipped := func() []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		io.WriteString(zw, metricsBody)
		zw.Close()
		b.WriteString(strings.Repeat("x", 2048)) // large whatever its compression
		return b.Bytes()
	}()
	for _, tc := range []struct {
		name, method, ae string
		h                http.Handler
		want             string
	}{
		{"no Accept-Encoding", http.MethodGet, "", writeInPieces(0, metricsBody), metricsBody},
		{"identity only", http.MethodGet, "identity", writeInPieces(0, metricsBody), metricsBody},
		{"gzip refused by q=0", http.MethodGet, "gzip;q=0, deflate", writeInPieces(0, metricsBody), metricsBody},
		{"small body", http.MethodGet, "gzip", writeInPieces(0, "ready\n"), "ready\n"},
		{"already encoded", http.MethodGet, "gzip", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, metricsBody)
		}), metricsBody},
		{"already gzip (pprof)", http.MethodGet, "gzip", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(gzipped[:1])
			w.Write(gzipped[1:])
		}), string(gzipped)},
	} {
		resp, body := gzipGet(t, tc.h, tc.method, tc.ae)
		if enc := resp.Header.Get("Content-Encoding"); enc == "gzip" {
			t.Errorf("%s: compressed", tc.name)
		}
		if string(body) != tc.want {
			t.Errorf("%s: body changed (%d bytes, want %d)", tc.name, len(body), len(tc.want))
		}
	}
}

func TestGzipKeepsStatusAndHeaders(t *testing.T) {
	resp, body := gzipGet(t, writeInPieces(http.StatusServiceUnavailable, metricsBody), http.MethodGet, "gzip")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("status %d, encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	if string(gunzip(t, body)) != metricsBody {
		t.Fatal("body differs")
	}

	resp, body = gzipGet(t, writeInPieces(http.StatusServiceUnavailable, "not ready"), http.MethodGet, "gzip")
	if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "not ready" {
		t.Fatalf("small 503: %d %q", resp.StatusCode, body)
	}

	resp, body = gzipGet(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		w.WriteHeader(http.StatusOK) // superfluous: the first status stands
	}), http.MethodGet, "gzip")
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("204: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	resp, _ = gzipGet(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strings.Repeat("9", 1)) // wrong once compressed: dropped
		io.WriteString(w, metricsBody)
	}), http.MethodGet, "gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.ContentLength == 9 {
		t.Fatalf("Content-Length kept on a compressed body: %v", resp.Header)
	}

	resp, body = gzipGet(t, writeInPieces(0, metricsBody), http.MethodHead, "gzip")
	if resp.Header.Get("Content-Encoding") != "" || len(body) != 0 {
		t.Fatalf("HEAD: %v %d", resp.Header, len(body))
	}

	resp, body = gzipGet(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "<html><body>"+metricsBody)
	}), http.MethodGet, "gzip")
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" || string(gunzip(t, body)) != "<html><body>"+metricsBody {
		t.Fatalf("sniffed Content-Type %q", ct)
	}
}

// TestGzipFlushStreams: a handler's flush reaches the client at once, compressed or not.
func TestGzipFlushStreams(t *testing.T) {
	for _, first := range []string{"hello\n", metricsBody} {
		release := make(chan struct{})
		srv := httptest.NewServer(gzipHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, first)
			w.(http.Flusher).Flush()
			<-release
			io.WriteString(w, "bye\n")
		})))
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		tr := &http.Transport{DisableCompression: true}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			if r, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]byte, len(first))
		if _, err := io.ReadFull(r, got); err != nil || string(got) != first {
			t.Fatalf("before the handler finished: %v, %d bytes", err, len(got))
		}
		close(release)
		rest, err := io.ReadAll(r)
		if err != nil || string(rest) != "bye\n" {
			t.Fatalf("rest %q, %v", rest, err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		srv.Close()
	}
}

func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0", "deflate, gzip;q=0.5", "*;q=0", "br", "x-gzip; q=1", ",,;", "gzip;q="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := acceptsGzip([]string{v})
		l := strings.ToLower(v)
		if got && !strings.Contains(l, "gzip") && !strings.Contains(l, "*") {
			t.Fatalf("acceptsGzip(%q) = true without gzip or *", v)
		}
		if !strings.Contains(l, "q=") && (strings.Contains(l, "gzip") || strings.Contains(l, "*")) {
			for part := range strings.SplitSeq(l, ",") {
				c, _, _ := strings.Cut(part, ";")
				if c = strings.TrimSpace(c); c == "gzip" || c == "x-gzip" || c == "*" {
					if !got {
						t.Fatalf("acceptsGzip(%q) = false, but %q has no quality", v, c)
					}
				}
			}
		}
	})
}
