package cache

import (
	"github.com/wingman-mesh/wingman/internal/metric"
)

// Label values as Istio's pkg/wasm/monitoring.go.
const (
	fetchSuccess     = "success"
	downloadFailure  = "download_failure"
	manifestFailure  = "manifest_failure"
	checksumMismatch = "checksum_mismatched"

	conversionSuccess   = "success"
	noRemoteLoad        = "no_remote_load"
	marshalFailure      = "marshal_failure"
	unmarshalFailure    = "unmarshal_failure"
	fetchFailure        = "fetch_failure"
	missRemoteFetchHint = "miss_remote_fetch_hint"
)

// metrics carry Istio's names (the agent registry adds the istio_agent_ prefix, as Istio's
// agent exporter does).
type metrics struct {
	entries            *metric.Gauge
	lookups            *metric.CounterVec
	fetches            *metric.CounterVec
	conversions        *metric.CounterVec
	conversionDuration *metric.Histogram
}

func newMetrics(reg *metric.Registry) *metrics {
	return &metrics{
		entries: reg.Gauge("wasm_cache_entries", "number of Wasm remote fetch cache entries."),
		lookups: reg.CounterVec("wasm_cache_lookup_count", "number of Wasm remote fetch cache lookups.", "hit"),
		fetches: reg.CounterVec("wasm_remote_fetch_count",
			"number of Wasm remote fetches and results, including success, download failure, and checksum mismatch.", "result"),
		conversions: reg.CounterVec("wasm_config_conversion_count",
			"number of Wasm config conversion count and results, including success, no remote load, marshal failure, remote fetch failure, miss remote fetch hint.", "result"),
		conversionDuration: reg.Histogram("wasm_config_conversion_duration",
			"Total time in milliseconds istio-agent spends on converting remote load in Wasm config.",
			[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}),
	}
}
