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
	lookups            labelled // hit: "true", "false"
	fetches            labelled // result
	conversions        labelled // result
	conversionDuration *metric.Histogram
}

// labelled is a counter family whose series are made up front: With on the hot path would
// render labels on every call.
type labelled map[string]*metric.Counter

func (l labelled) With(v string) *metric.Counter { return l[v] }

func newLabelled(v *metric.CounterVec, values ...string) labelled {
	l := labelled{}
	for _, x := range values {
		l[x] = v.With(x)
	}
	return l
}

func newMetrics(reg *metric.Registry) *metrics {
	return &metrics{
		entries: reg.Gauge("wasm_cache_entries", "number of Wasm remote fetch cache entries."),
		lookups: newLabelled(reg.CounterVec("wasm_cache_lookup_count", "number of Wasm remote fetch cache lookups.", "hit"),
			"true", "false"),
		fetches: newLabelled(reg.CounterVec("wasm_remote_fetch_count",
			"number of Wasm remote fetches and results, including success, download failure, and checksum mismatch.", "result"),
			fetchSuccess, downloadFailure, manifestFailure, checksumMismatch),
		conversions: newLabelled(reg.CounterVec("wasm_config_conversion_count",
			"number of Wasm config conversion count and results, including success, no remote load, marshal failure, remote fetch failure, miss remote fetch hint.", "result"),
			conversionSuccess, noRemoteLoad, marshalFailure, unmarshalFailure, fetchFailure, missRemoteFetchHint),
		conversionDuration: reg.Histogram("wasm_config_conversion_duration",
			"Total time in milliseconds istio-agent spends on converting remote load in Wasm config.",
			[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}),
	}
}
