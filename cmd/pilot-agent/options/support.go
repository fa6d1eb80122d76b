package options

// SupportMatrix is the support matrix of README.md and docs/compat.md (TestSupportMatrixInReadme
// keeps the README's copy the same). Every fact was read from Istio's git repository at the tag
// named; bootstrap/PARITY.md cites the files.
const SupportMatrix = `## Supported Istio releases

| Release | Read at | Template parameters (option/instances.go) |
|---|---|---|
| 1.28 | tag 1.28.10 | the 62 common names, plus ` + "`stats_compression`" + ` |
| 1.29 | tag 1.29.6 | the 62 common names, plus ` + "`envoy_metrics_stats_compression`, `global_downstream_max_connections`" + ` (both from 1.29.0: #58939 backports #58717; #58900) |
| 1.30 | tag 1.30.3 | as 1.29 |
| 1.31 | tag 1.31.0-rc.0 | as 1.29, plus ` + "`enable_self_discovery`, `secure_metrics_port`, `secure_merged_metrics_port`" + ` |
| master | commit 86c9f01 (2026-08, VERSION 1.32) | as 1.31 |

**Which release applies.** The release stamped into the binary: the Dockerfile's ` + "`ISTIO_VERSION`" + `
(the version of the proxyv2 image Wingman is layered on) becomes ` + "`-X main.istioVersion`" + `, which
the agent reports to istiod as ` + "`ISTIO_VERSION`" + ` and which picks the release by minor version
(` + "`bootstrap.ReleaseOf`" + `; an unstamped build is istio.io/api's version, 1.32). A version older
than 1.28 gets 1.28's behaviour, a newer one (or one that is not a version) master's, with a
warning at start. The image's own template (` + "`./var/lib/istio/envoy/envoy_bootstrap_tmpl.json`" + `)
is rendered with the stamped release's parameters, present exactly when that release's agent
sets them; a parameter the release does not define renders as Go's text/template renders a
missing key (` + "`<no value>`" + `, false in ` + "`if`" + `), as Istio's agent renders it, and is logged once
as a warning naming it; ` + "`pilot-agent bootstrap --validate`" + ` lists such parameters. Without a
template file, the built-in render equals master's template rendered for the same inputs.

| Aspect | 1.28 | 1.29 | 1.30 | 1.31 | master |
|---|---|---|---|---|---|
| Template parameters: names | same | same | same | same | same |
| Template parameters: values | same; ` + "`stats_compression`" + ` from the sidecar.istio.io/statsCompression annotation (gzip, zstd, brotli); runtime defaults without fixed_heap_use_allocated; the template writes the connection limit itself | same; ProxyConfig statsCompression (default true); connection limit from proxyMetadata, then runtime; fixed_heap_use_allocated | same; adds coalesce_lb_rebuilds_on_batch_update false; service cluster also from app.kubernetes.io/name | same; secure metrics ports, self discovery | same; connectionSettings.globalDownstreamConnectionLimit ranks first |
| Environment variables | same, but Wingman reads DNS_FORWARD_TIMEOUT, PILOT_AGENT_MERGE_ENVOY_STATS and AUTOMEMLIMIT, which this agent does not (different: set them only for 1.30 on); ENVOY_SECURE_*_PORT and ISTIO_META_ENABLE_SELF_DISCOVERY are ignored by the bootstrap, as here | as 1.28 | same (DNS_FORWARD_TIMEOUT, PILOT_AGENT_MERGE_ENVOY_STATS and automemlimit are this release's) | same; adds ENVOY_SECURE_METRICS_PORT, ENVOY_SECURE_MERGED_METRICS_PORT, ISTIO_META_ENABLE_SELF_DISCOVERY, DNS_PROXY_ADDR into the node metadata | same |
| Flags | same (the same flags at every tag) | same | same | same | same |
| Node metadata keys | same (STATIC_LABELS: the locality label rewritten with slashes when no labels file is read; istio-locality only) | same; topology.istio.io/locality ranks first | same | same; adds ENABLE_SELF_DISCOVERY, DNS_PROXY_ADDR, ENVOY_SECURE_METRICS_PORT, ENVOY_SECURE_MERGED_METRICS_PORT | same |
| ProxyConfig fileFlushInterval, fileFlushMinSizeKb | different: passed to Envoy (this agent, before #58651 of 1.29.0, does not) | same | same | same | same |
| Sub-commands | same for proxy, request, wait, version, istio-iptables (app/cmd.go, the same at every tag); collateral (Istio's documentation generator) refused: unknown command, exit 2; bootstrap, and istio-clean-iptables (Istio's older command), are additions | as 1.28 | as 1.28 | as 1.28 | as 1.28 |

` + "`docs/compat.md`" + ` has a row for every setting; ` + "`bootstrap/PARITY.md`" + ` has the bootstrap's
sources, file and tag, and the differences kept on purpose.
`
