package merge

import (
	"strings"
)

const (
	// TextFormat is Prometheus' text exposition format, the merged endpoint's default.
	TextFormat = "text/plain; version=0.0.4; charset=utf-8"
	textRange  = "text/plain;version=0.0.4"
	omRange    = "application/openmetrics-text;version=0.0.1"
	omType     = "application/openmetrics-text"
)

// filterAccept rewrites a scraper's Accept header for one upstream: only text (and, when
// openMetrics, OpenMetrics) ranges survive; "*/*" and "text/*" become text 0.0.4 and
// "application/*" becomes OpenMetrics 0.0.1; protobuf and everything else are dropped. Each
// range keeps its parameters (q). The result is "" when nothing survives.
func filterAccept(accept string, openMetrics bool) string {
	if accept == "" {
		return ""
	}
	var b strings.Builder
	for item := range strings.SplitSeq(accept, ",") {
		item = strings.TrimSpace(item)
		media, params, _ := strings.Cut(item, ";")
		media = strings.ToLower(strings.TrimSpace(media))
		var out string
		switch media {
		case "text/plain":
			out = item
		case omType:
			if openMetrics {
				out = item
			}
		case "*/*", "text/*":
			out = withParams(textRange, params)
		case "application/*":
			if openMetrics {
				out = withParams(omRange, params)
			}
		}
		if out == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(out)
	}
	return b.String()
}

// withParams appends params to a replacement range, dropping any version parameter (the
// replacement fixes its own).
func withParams(rng, params string) string {
	var b strings.Builder
	b.WriteString(rng)
	for p := range strings.SplitSeq(params, ";") {
		p = strings.TrimSpace(p)
		if p == "" || strings.HasPrefix(strings.ToLower(p), "version=") {
			continue
		}
		b.WriteByte(';')
		b.WriteString(p)
	}
	return b.String()
}

// isOpenMetrics reports whether a response Content-Type is OpenMetrics.
func isOpenMetrics(contentType string) bool {
	return len(contentType) >= len(omType) && strings.EqualFold(contentType[:len(omType)], omType)
}
