package bootstrap

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Pod annotations that shape stats.
const (
	annInclusionPrefixes = "sidecar.istio.io/statsInclusionPrefixes"
	annInclusionSuffixes = "sidecar.istio.io/statsInclusionSuffixes"
	annInclusionRegexps  = "sidecar.istio.io/statsInclusionRegexps"
	annExtraStatTags     = "sidecar.istio.io/extraStatTags"
	annHistogramBuckets  = "sidecar.istio.io/statsHistogramBuckets"
	annFlushInterval     = "sidecar.istio.io/statsFlushInterval"
	annEvictionInterval  = "sidecar.istio.io/statsEvictionInterval"
)

// delimitedTags lead the tag extractors with Istio's ';'-delimited scheme (the default since
// Istio 1.23; the ENABLE_DELIMITED_STATS_TAG_REGEX switch back to the older regexes is gone from
// the Istio release followed, so this is the only scheme): cluster and HTTP connection manager
// stat names end at ';', so a name may hold dots. Established from Istio 1.25.0's rendered
// envoy-rev.json (see PARITY.md).
var delimitedTags = []TagSpecifier{
	{"cluster_name", `^cluster(\.(.+);)`},
	{"http_conn_manager_prefix", `^http\.(((?:[_.[:digit:]\w]*|[_\[\]aAbBcCdDeEfF[:digit:]\w\:]*));\.)`},
	{"thread_name", `^server(\.(.+))\.watchdog`},
	{"tcp_prefix", `^tcp\.((.*?)\.)\w+?$`},
	{"response_code", `_rq(_(\d{3}))$`},
	{"response_code_class", `_rq(_(\dxx))$`},
	{"http_conn_manager_listener_prefix", `^listener(?=\.).*?\.http\.(((?:[_.[:digit:]]*|[_\[\]aAbBcCdDeEfF[:digit:]]*))\.)`},
	{"listener_address", `^listener\.(((?:[_.[:digit:]]*|[_\[\]aAbBcCdDeEfF[:digit:]]*))\.)`},
	{"mongo_prefix", `^mongo\.(.+?)\.(collection|cmd|cx_|op_|delays_|decoding_)(.*?)$`},
}

var trailingTags = []TagSpecifier{
	{"cache", `(cache\.(.+?)\.)`},
	{"component", `(component\.(.+?)\.)`},
	{"tag", `(tag\.(.+?);\.)`},
	{"wasm_filter", `(wasm_filter\.(.+?)\.)`},
	{"authz_enforce_result", `rbac(\.(allowed|denied))`},
	{"authz_dry_run_action", `(\.istio_dry_run_(allow|deny)_)`},
	{"authz_dry_run_result", `(\.shadow_(allowed|denied))`},
}

func (st *state) statsConfig() (*StatsConfig, error) {
	ann := st.meta.Annotations
	pm := st.pc.GetProxyStatsMatcher()

	tags := slices.Clone(delimitedTags)
	seen := map[string]bool{}
	for _, t := range append(slices.Clone(st.pc.GetExtraStatTags()), splitList(ann[annExtraStatTags])...) {
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		tags = append(tags, TagSpecifier{TagName: t, Regex: "(" + t + `=\.=(.*?);\.;)`})
	}
	tags = append(tags, trailingTags...)

	pick := func(annKey string, fromPC []string) []string {
		if v, ok := ann[annKey]; ok {
			return splitList(v)
		}
		return fromPC
	}
	prefixes := append(pick(annInclusionPrefixes, pm.GetInclusionPrefixes()), "cluster_manager", "listener_manager", "server", "cluster.xds-grpc", "wasm")
	suffixes := append(pick(annInclusionSuffixes, pm.GetInclusionSuffixes()), "rbac.allowed", "rbac.denied", "shadow_allowed", "shadow_denied")
	if st.cfg.ExitOnZeroActiveConnections {
		suffixes = append(suffixes, "downstream_cx_active")
	}
	regexps := append(pick(annInclusionRegexps, pm.GetInclusionRegexps()), `vhost\..*\.route\..*`)

	patterns := []StringMatcher{{Prefix: "reporter="}}
	if st.discovery {
		patterns = append(patterns, StringMatcher{Prefix: "workload_discovery"})
	}
	for _, p := range st.expandPodIP(prefixes) {
		patterns = append(patterns, StringMatcher{Prefix: p})
	}
	for _, s := range st.expandPodIP(suffixes) {
		patterns = append(patterns, StringMatcher{Suffix: s})
	}
	for _, r := range st.expandPodIP(regexps) {
		patterns = append(patterns, StringMatcher{SafeRegex: &RegexMatcher{Regex: r}})
	}
	patterns = append(patterns, StringMatcher{Prefix: "component"}, StringMatcher{Prefix: "istio"})

	sc := &StatsConfig{StatsTags: tags, StatsMatcher: &StatsMatcher{InclusionList: ListStringMatcher{Patterns: patterns}}}
	if v := ann[annHistogramBuckets]; v != "" {
		var buckets map[string][]float64
		if err := json.Unmarshal([]byte(v), &buckets); err != nil {
			return nil, fmt.Errorf("bootstrap: annotation %s: want JSON {prefix: [buckets]}: %w", annHistogramBuckets, err)
		}
		keys := make([]string, 0, len(buckets))
		for k := range buckets {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sc.HistogramBucketSettings = append(sc.HistogramBucketSettings, HistogramBucketSettings{Match: StringMatcher{Prefix: k}, Buckets: buckets[k]})
		}
	}
	return sc, nil
}

// statsIntervals sets stats_flush_interval when its annotation parses, and stats_eviction_interval
// only when it is a multiple of the flush interval (Envoy refuses otherwise).
func (st *state) statsIntervals(b *Bootstrap) error {
	b.StatsFlushInterval, b.StatsEvictionInterval = st.statsIntervalValues()
	return nil
}

// statsIntervalValues is (stats_flush_interval, stats_eviction_interval) in Envoy's duration form,
// "" when not set.
func (st *state) statsIntervalValues() (flushOut, evictOut string) {
	ann := st.meta.Annotations
	flush := 5 * time.Second // Envoy's default
	if v := ann[annFlushInterval]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			st.logger().Warn("ignoring annotation", "annotation", annFlushInterval, "value", v)
		} else {
			flush = d
			flushOut = envoyDuration(d)
		}
	}
	if v := ann[annEvictionInterval]; v != "" {
		if e, ok := st.statsEvictionParam(); ok && flush > 0 {
			evictOut = e // whole seconds, as Istio's getStatsOptions builds it
		} else {
			st.logger().Warn("ignoring annotation: not a multiple of the flush interval", "annotation", annEvictionInterval, "value", v)
		}
	}
	return flushOut, evictOut
}

// statsFlushParam is the stats_flush_interval template parameter: the annotation's value as a
// time.Duration when it parses (getStatsOptions, EnvoyStatsFlushInterval: newOption of a
// time.Duration, so a template prints Go's form, "5s" or "1m30s").
func (st *state) statsFlushParam() (time.Duration, bool) {
	v, ok := st.meta.Annotations[annFlushInterval]
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	return d, err == nil
}

// statsEvictionParam is the stats_eviction_interval template parameter: set when the annotation
// parses and is a multiple of the flush interval, as whole seconds "%ds" (getStatsOptions builds a
// durationpb of int64(d.Seconds()); envoyDurationConverter prints it).
func (st *state) statsEvictionParam() (string, bool) {
	v, ok := st.meta.Annotations[annEvictionInterval]
	if !ok {
		return "", false
	}
	flush := 5 * time.Second
	if f, ok := st.statsFlushParam(); ok {
		flush = f
	}
	d, err := time.ParseDuration(v)
	if err != nil || flush <= 0 || d%flush != 0 {
		return "", false
	}
	return fmt.Sprintf("%ds", int64(d.Seconds())), true
}

// annStatsCompression is 1.28's sidecar.istio.io/statsCompression annotation (config.go at
// 1.28.10: getStatsOptions passes it as stats_compression when it is gzip, zstd or brotli).
const annStatsCompression = "sidecar.istio.io/statsCompression"

// statsCompressionAnnotation is 1.28's stats_compression parameter: "" unless the annotation
// names one of the compressors Envoy knows.
func (st *state) statsCompressionAnnotation() string {
	switch v := st.meta.Annotations[annStatsCompression]; v {
	case "gzip", "zstd", "brotli":
		return v
	}
	return ""
}

func envoyDuration(d time.Duration) string {
	return fmt.Sprintf("%gs", d.Seconds())
}

// expandPodIP replaces {pod_ip} in a pattern by each instance IP.
func (st *state) expandPodIP(in []string) []string {
	out := make([]string, 0, len(in))
	for _, p := range in {
		if !strings.Contains(p, "{pod_ip}") {
			out = append(out, p)
			continue
		}
		for _, ip := range st.ips {
			out = append(out, strings.ReplaceAll(p, "{pod_ip}", ip))
		}
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
