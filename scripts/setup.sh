#!/usr/bin/env bash
# The first step of `make test` (and of `make demo`): makes a fresh machine with Go ready for the
# tests, or says exactly what is missing.
#
#   - Go: the version go.mod asks for (the go command refuses older ones with a less clear error).
#   - Modules: `go mod download`, so the first compile does not look like a hang.
#   - capture's network-namespace tests (package capture, `pilot-agent istio-iptables`) program
#     iptables and nftables in namespaces they create: they need root and Debian's iptables,
#     nftables and iproute2. As root with apt-get, missing packages are installed here; as root
#     without apt-get the step fails naming them (those tests would fail, not skip, as root); not
#     as root, it says the tests will be skipped and goes on.
#
# It changes nothing when everything is there, so running it again costs a second.
set -euo pipefail
cd "$(dirname "$0")/.."

want=$(awk '$1 == "go" { print $2; exit }' go.mod)
have=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
if [ -z "$have" ]; then
	echo "setup: no Go toolchain on PATH; install Go $want or newer (https://go.dev/dl/)" >&2
	exit 1
fi
older() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ] && [ "$1" != "$2" ]; }
if older "$have" "$want"; then
	echo "setup: Go $have is older than the $want go.mod asks for; install Go $want or newer" >&2
	exit 1
fi
echo "setup: Go $have (go.mod asks for $want or newer)"

if ! go mod download; then
	echo "setup: go mod download failed: the Go module proxy ($(go env GOPROXY)) must be reachable" >&2
	exit 1
fi
echo "setup: Go modules downloaded"

# tool:package pairs for capture's network-namespace tests.
missing=()
for pair in iptables:iptables nft:nftables ip:iproute2; do
	command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair##*:}")
done
if [ "$(id -u)" != 0 ]; then
	if ((${#missing[@]})); then
		echo "setup: not root, and ${missing[*]} missing: capture's network-namespace tests will be skipped (as root they install with apt-get and run)"
	else
		echo "setup: not root: capture's network-namespace tests will be skipped (they need root to create namespaces)"
	fi
	exit 0
fi
if ((${#missing[@]})); then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "setup: capture's network-namespace tests need the packages ${missing[*]} (iptables, nftables, iproute2), and this machine has no apt-get: install them, then run make test again" >&2
		exit 1
	fi
	echo "setup: installing ${missing[*]} for capture's network-namespace tests (apt-get)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Namespaces must be creatable too (a container without CAP_SYS_ADMIN cannot).
ns="wingman-setup-$$"
if ! ip netns add "$ns" 2>/dev/null; then
	echo "setup: root, but 'ip netns add' fails here (no CAP_SYS_ADMIN?): capture's network-namespace tests need network namespaces" >&2
	exit 1
fi
ip netns del "$ns"
echo "setup: iptables, nftables, iproute2 present; network namespaces work"
