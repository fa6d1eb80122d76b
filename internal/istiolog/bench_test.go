package istiolog

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// A line through a slog.Logger, fields of the common kinds: the encoding allocates nothing per
// line (the pooled buffer is reused); what remains is slog's own.
func benchLogger(json bool) *slog.Logger {
	l, err := New(Options{JSON: json, StackTraceLevels: DefaultStackTraceLevels}, io.Discard, io.Discard)
	if err != nil {
		panic(err)
	}
	return l.Logger(ScopeXDSProxy)
}

func logLine(log *slog.Logger) {
	log.Info("upstream response", "type", "type.googleapis.com/envoy.config.cluster.v3.Cluster", "resources", 42, "took", 3*time.Millisecond)
}

func BenchmarkText(b *testing.B) {
	log := benchLogger(false)
	b.ReportAllocs()
	for b.Loop() {
		logLine(log)
	}
}

func BenchmarkJSON(b *testing.B) {
	log := benchLogger(true)
	b.ReportAllocs()
	for b.Loop() {
		logLine(log)
	}
}

// BenchmarkSlogText is slog's own text handler on the same line, for a same-run comparison.
func BenchmarkSlogText(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.ReportAllocs()
	for b.Loop() {
		logLine(log)
	}
}

// TestLineAllocations gates the allocations of a line: none in the handler for these kinds.
func TestLineAllocations(t *testing.T) {
	for _, json := range []bool{false, true} {
		log := benchLogger(json)
		if n := testing.AllocsPerRun(200, func() { logLine(log) }); n > 0 {
			t.Errorf("json %v: %.1f allocations per line, want 0", json, n)
		}
	}
}
