package status

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// gzipMinSize is the smallest body worth compressing; smaller ones go out as they are.
const gzipMinSize = 1024

// gzipWriters are BestSpeed writers: merged metrics (the bulk of the bytes) compress about
// 8:1 at that level, and a scrape of a busy Envoy should not cost the agent much CPU. The
// standard library's compressor is linked anyway (runtime/pprof writes gzip).
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// gzipHandler compresses responses with gzip for clients that accept it (Prometheus does), as
// Istio's status server does. A body under gzipMinSize, one the handler encoded itself, one
// already in gzip (pprof profiles) and a response without a body are left alone.
func gzipHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if r.Method == http.MethodHead || !acceptsGzip(r.Header.Values("Accept-Encoding")) {
			h.ServeHTTP(w, r)
			return
		}
		gw := &gzipResponseWriter{ResponseWriter: w}
		defer gw.close()
		h.ServeHTTP(gw, r)
	})
}

// acceptsGzip reports whether Accept-Encoding lists gzip (or *) with a non-zero quality.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.TrimSpace(coding)
			if !strings.EqualFold(coding, "gzip") && !strings.EqualFold(coding, "x-gzip") && coding != "*" {
				continue
			}
			if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err == nil && f == 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// gzipResponseWriter holds the status and the first gzipMinSize bytes until it knows whether
// to compress, then either streams through a pooled gzip writer or passes everything through.
type gzipResponseWriter struct {
	http.ResponseWriter
	code    int          // status held back until decided; 0 means 200
	buf     []byte       // body held back until decided
	decided bool         // from here on, zw != nil means compressing
	zw      *gzip.Writer // nil when passing through
}

func (w *gzipResponseWriter) WriteHeader(code int) {
	if w.decided {
		w.ResponseWriter.WriteHeader(code) // superfluous: net/http reports it
		return
	}
	if w.code != 0 {
		return // superfluous, and the first status is still held
	}
	if code < 200 {
		w.ResponseWriter.WriteHeader(code) // informational: sent at once, not the final status
		return
	}
	w.code = code
}

func (w *gzipResponseWriter) Write(p []byte) (int, error) {
	if !w.decided {
		if len(w.buf)+len(p) < gzipMinSize {
			w.buf = append(w.buf, p...)
			return len(p), nil
		}
		if err := w.decide(p, true); err != nil {
			return 0, err
		}
		if w.zw == nil {
			return w.ResponseWriter.Write(p)
		}
	} else if w.zw == nil {
		return w.ResponseWriter.Write(p)
	}
	return w.zw.Write(p)
}

// decide sends the header, compressing if big says the body reached gzipMinSize and the
// response is compressible, then writes the held bytes. next is the write being decided on.
func (w *gzipResponseWriter) decide(next []byte, big bool) error {
	w.decided = true
	h := w.Header()
	if h.Get("Content-Type") == "" && len(w.buf)+len(next) > 0 {
		// What net/http would sniff had the handler written directly (from the first 512 bytes).
		sniff := w.buf
		if len(sniff) < 512 {
			sniff = append(sniff[:len(sniff):len(sniff)], next[:min(len(next), 512-len(sniff))]...)
		}
		h.Set("Content-Type", http.DetectContentType(sniff))
	}
	if big && w.compressible(next) {
		h.Set("Content-Encoding", "gzip")
		h.Del("Content-Length")
		w.zw = gzipWriters.Get().(*gzip.Writer)
		w.zw.Reset(w.ResponseWriter)
	}
	if w.code != 0 {
		w.ResponseWriter.WriteHeader(w.code)
	}
	if len(w.buf) == 0 {
		return nil
	}
	held := w.buf
	w.buf = nil
	var err error
	if w.zw != nil {
		_, err = w.zw.Write(held)
	} else {
		_, err = w.ResponseWriter.Write(held)
	}
	return err
}

func (w *gzipResponseWriter) compressible(next []byte) bool {
	h := w.Header()
	if h.Get("Content-Encoding") != "" || w.code == http.StatusNoContent || w.code == http.StatusNotModified {
		return false
	}
	first := w.buf
	if len(first) < 2 {
		first = append(first[:len(first):len(first)], next[:min(2, len(next))]...)
	}
	return len(first) < 2 || first[0] != 0x1f || first[1] != 0x8b // gzip magic: already compressed
}

// Flush sends what is held (compressed if it is big enough by now) and flushes the client
// connection, so a handler's explicit flush still reaches the client at once.
func (w *gzipResponseWriter) Flush() {
	if !w.decided {
		if err := w.decide(nil, len(w.buf) >= gzipMinSize); err != nil {
			return
		}
	}
	if w.zw != nil && w.zw.Flush() != nil {
		return
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (deadlines, hijack).
func (w *gzipResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// close finishes the response: a small body goes out as it is, a compressed one gets its
// trailer and the writer goes back to the pool.
func (w *gzipResponseWriter) close() {
	if !w.decided {
		_ = w.decide(nil, false)
	}
	if w.zw != nil {
		_ = w.zw.Close()
		w.zw.Reset(nil)
		gzipWriters.Put(w.zw)
		w.zw = nil
	}
}

var _ http.Flusher = (*gzipResponseWriter)(nil)
