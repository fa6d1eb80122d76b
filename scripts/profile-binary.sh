#!/usr/bin/env bash
# Profiles the shipped binary (out/pilot-agent, as `make build` makes it) under the perf
# harness's 4 MB pushes, beside the floor forwarder (lab/floorfwd) of the same run, and writes
# what perf/results/profile-binary.md shows: the top functions by flat and by cumulative time of
# both, and a flame graph (SVG) of each.
#
#   scripts/profile-binary.sh [OUT_DIR] [SECONDS] [SCENARIO]
#
# OUT_DIR defaults to out/profile-binary, SECONDS (how long the pushes last, and the binary's
# CPU profile, taken from its own pprof endpoint on the status port) to 20, SCENARIO to
# large_4mb. The agent's profile covers exactly the pushes; the floor's (runtime/pprof in the
# forwarder) its whole life, which is the pushes and a second of start-up and ready-wait.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/profile-binary}
secs=${2:-20}
scen=${3:-large_4mb}
bin=${BIN:-out/pilot-agent}
rm -rf "$out"
mkdir -p "$out"
go run ./perf/cmd/perf -agent "$bin" -scenarios "$scen" -runs 1 -pprof "$out/pprof" -pprof-seconds "$secs" -out "$out/report"
for kind in wingman floor; do
	p=$(ls "$out"/pprof/"$scen"-run0-"$kind"-p0*.cpu.pprof | head -1)
	go tool pprof -top -nodecount 35 "$p" >"$out/$kind.flat.txt" 2>/dev/null
	go tool pprof -top -cum -nodecount 45 "$p" >"$out/$kind.cum.txt" 2>/dev/null
	go tool pprof -traces "$p" 2>/dev/null | go run ./perf/cmd/flame -title "$kind, $scen, ${secs} s of pushes ($(basename "$p"))" >"$out/$kind.flame.svg"
done
grep -E "^\| $scen \| (cpu_ms_per_mb|cpu_ms_per_push|pushes|mb_forwarded) " "$out/report/report.md"
echo "profiles, tables and flame graphs in $out"
