#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for the given time (default 5s) each.
set -euo pipefail
fuzztime=${1:-5s}
cd "$(dirname "$0")/.."
status=0
count=0
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		echo "fuzz: $pkg $target ($fuzztime)"
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
			status=1
		fi
		count=$((count + 1))
	done
done < <(git ls-files --cached --others --exclude-standard '*_test.go' | xargs grep -l '^func Fuzz' | sort)
echo "fuzz: $count targets run"
exit $status
