#!/bin/sh
# floor-ratios.sh FILE: from `go test -run '^$' -bench 'Floor|ForwardCPU|ReferenceCPU' -count N
# ./bench/` output, prints per size the median cpu-ns/MB of the floor, Wingman's proxy and the
# reference proxy, Wingman's multiple of the floor, and the floor's and Wingman's share of the
# reference's CPU (medians over the N runs of each benchmark).
set -eu
awk '
/^Benchmark(Floor|ForwardCPU|ReferenceCPU)\/size=/ {
	split($1, a, "/"); kind = a[1]; sub(/^Benchmark/, "", kind)
	size = a[2]; sub(/^size=/, "", size); sub(/-[0-9]+$/, "", size)
	for (i = 2; i < NF; i++) if ($(i+1) == "cpu-ns/MB") v[kind, size, ++n[kind, size]] = $i
	if (!(size in seen)) { seen[size] = 1; order[++ns] = size }
}
function median(kind, size,   k, i, j, t, m) {
	m = n[kind, size]
	if (m == 0) return 0
	for (i = 1; i <= m; i++) s[i] = v[kind, size, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
	return (m % 2) ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
}
END {
	printf "%-6s %12s %12s %12s %9s %9s %9s\n", "size", "floor µs/MB", "wingman", "reference", "w/floor", "floor/ref", "w/ref"
	for (k = 1; k <= ns; k++) {
		sz = order[k]; f = median("Floor", sz); w = median("ForwardCPU", sz); r = median("ReferenceCPU", sz)
		printf "%-6s %12.0f %12.0f %12.0f %9.2f %9.2f %9.2f\n", sz, f / 1000, w / 1000, r / 1000, (f ? w / f : 0), (r ? f / r : 0), (r ? w / r : 0)
	}
}' "$1"
