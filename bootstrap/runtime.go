package bootstrap

import (
	"math"
	"strconv"
)

// runtimeFlags is the static runtime layer: Istio's defaults (extractRuntimeFlags in config.go of
// the stamped release: fixed_heap_use_allocated from 1.29, coalesce_lb_rebuilds_on_batch_update
// from 1.30), FIPS extras, then runtimeValues
// ("" deletes a default, "true"/"false" become bools).
func (st *state) runtimeFlags() map[string]any {
	flags := map[string]any{
		"re2.max_program_size.error_level": "32768",
		"envoy.deprecated_features:envoy.config.listener.v3.Listener.hidden_envoy_deprecated_use_original_dst": true,
		"envoy.reloadable_features.http_reject_path_with_fragment":                                             false,
	}
	if st.release.runtimeFixedHeap() {
		flags["envoy.reloadable_features.fixed_heap_use_allocated"] = true
	}
	if st.release.runtimeCoalesce() {
		flags["envoy.reloadable_features.coalesce_lb_rebuilds_on_batch_update"] = false
	}
	if st.cfg.FIPS {
		flags["envoy.reloadable_features.google_grpc_disable_tls_13"] = true
	}
	if st.cfg.KeepFragmentInPath {
		// Istio's extractRuntimeFlags: a string, and named backwards on purpose (kept by Istio).
		flags["envoy.reloadable_features.http_strip_fragment_from_path_unsafe_if_disabled"] = "false"
	}
	for k, v := range st.pc.GetRuntimeValues() {
		switch v {
		case "":
			delete(flags, k)
		case "true":
			flags[k] = true
		case "false":
			flags[k] = false
		default:
			flags[k] = v
		}
	}
	return flags
}

// globalDownstreamMaxConnections is the global downstream connection limit as config.go's
// getNodeMetadataOptions resolves it: (master only) ProxyConfig
// connectionSettings.globalDownstreamConnectionLimit when above 0; then proxyMetadata
// ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS whenever it parses as an integer (strconv.Atoi,
// any value); then the runtime value overload.global_downstream_max_connections when it parses;
// else MaxInt32. 1.28 passes no limit (its template writes 2147483647).
func (st *state) globalDownstreamMaxConnections() int64 {
	if st.release < Release129 {
		return math.MaxInt32
	}
	if st.release.connectionSettingsLimit() {
		if v := st.pc.GetConnectionSettings().GetGlobalDownstreamConnectionLimit(); v != nil && v.GetValue() > 0 {
			return int64(v.GetValue())
		}
	}
	if v, err := strconv.Atoi(st.pc.GetProxyMetadata()["ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS"]); err == nil {
		return int64(v)
	}
	if v, err := strconv.Atoi(st.pc.GetRuntimeValues()["overload.global_downstream_max_connections"]); err == nil {
		return int64(v)
	}
	return math.MaxInt32
}

func (st *state) overloadManager() *OverloadManager {
	limit := st.globalDownstreamMaxConnections()
	return &OverloadManager{ResourceMonitors: []TypedExtension{{
		Name: "envoy.resource_monitors.global_downstream_max_connections",
		TypedConfig: map[string]any{
			"@type":                             typeDownstreamConns,
			"max_active_downstream_connections": limit, // a number, as Istio's template writes it
		},
	}}}
}
