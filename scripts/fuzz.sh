#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for the given time each (default 30s: CI gives
# every target at least 30 s, about 26 min for 49 targets, well inside its 90-minute budget; at 5 s
# some targets spent the whole run on their seed corpus and executed a handful of inputs).
#
# A target fails when the fuzzer reports a failing input (it writes a reproducer under
# testdata/fuzz, which `go test` then replays in every run). Go 1.26's coordinator can also end
# a run with a bare "context deadline exceeded" when -fuzztime expires while a worker is
# mid-call (go.dev/issue/75804, fixed in Go 1.27): no input failed then, and nothing was
# written. Such a run is retried once; if it happens again it is reported as a flake, not a
# failure. Any other non-zero exit fails.
#
# A target also fails when it stalls: fewer than FUZZ_MIN_EXECS executions (default 10,000) per
# 30 s of fuzzing time, scaled with the time given (5,000 at 15s, 100,000 at 5m), as the last
# "fuzz: elapsed: ..., execs: N (.../sec)" line of `go test -fuzz` counts them. Such a target
# explored almost nothing and passing it would say otherwise. The usual cause is an input of
# kilobytes: every input that finds new coverage is minimised first (Go tries removing every
# byte range, O(n^2) runs, for up to -fuzzminimizetime), and while both workers minimise, no
# execution is counted; or per-execution work such as key generation, goroutines or timers.
# Minimising is bounded by a count, FUZZ_MINIMIZE (default 100x, -fuzzminimizetime), not 30 s:
# with 30 s, one find early in a 30 s run could take a worker the whole run (FuzzRenderConfig,
# whose input costs milliseconds, made 3,666 executions in 30 s with 30 s, 4,319 with 3 s and
# 13,491 with 100x on the same loaded machine, and kept 75 inputs instead of 4). A failing input
# is still written, minimised less; to minimise one further, run its target on it alone:
# go test -run 'FuzzX/<file>' -fuzz 'FuzzX' -fuzzminimizetime 60s ./pkg.
# A count (-fuzztime 1000x) is run as given, with no rate floor. The executions of every
# target are listed at the end. FUZZ_ONLY, an extended regexp, runs only the targets whose
# "./package Target" it matches.
set -euo pipefail
fuzztime=${1:-30s}
min_per_30s=${FUZZ_MIN_EXECS:-10000}
minimize=${FUZZ_MINIMIZE:-100x}
cd "$(dirname "$0")/.."
status=0
count=0
flakes=0
slow=0
summary=()
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# millis prints a Go duration made of integer h/m/s/ms parts (30s, 5m, 1m30s, 1500ms) in
# milliseconds, or nothing for anything else (a count such as 1000x).
millis() {
	local d=$1 total=0 n unit
	[[ $d =~ ^([0-9]+(h|ms|m|s))+$ ]] || return 0
	while [[ $d =~ ^([0-9]+)(h|ms|m|s)(.*)$ ]]; do
		n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]}
		case $unit in
		h) total=$((total + n * 3600000)) ;;
		m) total=$((total + n * 60000)) ;;
		s) total=$((total + n * 1000)) ;;
		ms) total=$((total + n)) ;;
		esac
	done
	echo "$total"
}

ms=$(millis "$fuzztime")
if [ -n "$ms" ]; then
	min_execs=$((min_per_30s * ms / 30000))
	echo "fuzz: each target must reach $min_execs executions in $fuzztime ($min_per_30s per 30 s)"
elif [[ $fuzztime =~ ^[0-9]+x$ ]]; then
	min_execs=0
else
	echo "fuzz: $fuzztime is neither a duration of h/m/s/ms parts nor a count (1000x)" >&2
	exit 2
fi

# deadline_flake reports whether the log in $out is the coordinator's deadline race alone.
deadline_flake() {
	grep -q '^    context deadline exceeded$' "$out" &&
		! grep -q 'Failing input written to' "$out" &&
		! grep -qE '^panic:|_test\.go:[0-9]+:' "$out"
}

while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		if [ -n "${FUZZ_ONLY:-}" ] && ! [[ "$pkg $target" =~ $FUZZ_ONLY ]]; then
			continue
		fi
		count=$((count + 1))
		for attempt in 1 2; do
			echo "fuzz: $pkg $target ($fuzztime)"
			if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" >"$out" 2>&1; then
				cat "$out"
				execs=$(grep -oE '^fuzz: elapsed: .*execs: [0-9]+' "$out" | tail -1 | grep -oE '[0-9]+$' || true)
				execs=${execs:-0}
				if [ "$execs" -lt "$min_execs" ]; then
					echo "fuzz: $pkg $target: FAILED: $execs executions in $fuzztime, below the floor of $min_execs: it stalls (see scripts/fuzz.sh)"
					summary+=("$(printf '%-28s %-32s %9s  STALLED' "$pkg" "$target" "$execs")")
					slow=$((slow + 1))
					status=1
				else
					echo "fuzz: $pkg $target: $execs executions in $fuzztime"
					summary+=("$(printf '%-28s %-32s %9s' "$pkg" "$target" "$execs")")
				fi
				break
			fi
			cat "$out"
			if ! deadline_flake; then
				summary+=("$(printf '%-28s %-32s %9s  FAILED' "$pkg" "$target" -)")
				status=1
				break
			fi
			if [ "$attempt" = 2 ]; then
				echo "fuzz: $pkg $target: the fuzzing deadline race twice in a row (go.dev/issue/75804); no input failed"
				summary+=("$(printf '%-28s %-32s %9s  deadline race twice' "$pkg" "$target" -)")
				flakes=$((flakes + 1))
			else
				echo "fuzz: $pkg $target: the fuzzing deadline race (go.dev/issue/75804), no input failed; running it again"
			fi
		done
	done
done < <(git ls-files --cached --others --exclude-standard '*_test.go' | xargs grep -l '^func Fuzz' | sort)
if [ "${#summary[@]}" -gt 0 ]; then
	echo "fuzz: executions in $fuzztime per target:"
	printf '  %s\n' "${summary[@]}"
fi
echo "fuzz: $count targets run, $slow below $min_execs executions, $flakes deadline flakes"
exit $status
