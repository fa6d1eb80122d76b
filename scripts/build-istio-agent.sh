#!/usr/bin/env bash
# build-istio-agent.sh: builds Istio's own pilot-agent of one tag, outside this repository, for
# scripts/side-by-side.sh. Nothing of Istio's is stored here: the source is `git archive` of
# Istio's repository (ISTIO_GIT_DIR, default /work/.mirror/istio+istio/repo) into WORK.
#
#   scripts/build-istio-agent.sh TAG [VERSION]      -> $WORK/pilot-agent-TAG
#
# VERSION (default TAG; 1.32.0 for master) is stamped as Istio's buildVersion, so the agent reports
# the ISTIO_VERSION Wingman stamped for the same tag reports. Where the Go module proxy does not
# serve a version Istio's go.mod names, the build substitutes (in WORK only), and says so: a module
# whose code is compiled in gets the nearest version that is served (SUBST_* below, master's for
# go-control-plane), a module only named in the module graph an empty module of the same path.
# bootstrap/SIDE_BY_SIDE.md lists what each tag needed.
set -euo pipefail
tag=${1:?usage: $0 TAG [VERSION]}
version=${2:-$tag}
[ "$tag" = master ] && version=${2:-1.32.0}
git_dir=${ISTIO_GIT_DIR:-/work/.mirror/istio+istio/repo}
work=${WORK:-/work/istio-src}
SUBST_ENVOY=${SUBST_ENVOY:-v1.37.1-0.20260731231718-6c0b035a1609}
SUBST_CONTRIB=${SUBST_CONTRIB:-v1.36.1-0.20260731231718-6c0b035a1609}
SUBST_API=${SUBST_API:-}
src=$work/$tag
if [ ! -d "$src" ]; then
	mkdir -p "$src"
	git --git-dir="$git_dir" archive "$tag" | tar -x -C "$src"
fi
cd "$src"
for _ in $(seq 12); do
	out=$(GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 10 go build -ldflags "-X istio.io/istio/pkg/version.buildVersion=$version" \
		-o "$work/pilot-agent-$tag" ./pilot/cmd/pilot-agent 2>&1 | grep -v '^go: downloading' || true)
	mod=$(grep -o 'go: [^@ ]*@[^:]*: reading [^ ]*\.mod: 403' <<<"$out" | head -1 | sed 's/go: \([^@]*\)@.*/\1/' || true)
	zip=$(grep -o '[^ ]*@[^:]*: reading [^ ]*\.zip: 403' <<<"$out" | head -1 | sed 's/@.*//' || true)
	m=${mod:-$zip}
	r=''
	case $m in
	github.com/envoyproxy/go-control-plane/envoy) r=$SUBST_ENVOY ;;
	github.com/envoyproxy/go-control-plane/contrib) r=$SUBST_CONTRIB ;;
	istio.io/api)
		case $tag in
		1.28.* | 1.29.*) r=${SUBST_API:-v1.29.8} ;;
		*) r=${SUBST_API:-v1.31.0-alpha.1.0.20260819121012-5803fb6accf7} ;;
		esac
		;;
	esac
	if [ -n "$r" ]; then
		echo "substituted: $m by $r"
		go mod edit -replace "$m=$m@$r"
	elif [ -n "$mod" ]; then
		d=stubs/${mod//\//_}
		mkdir -p "$d"
		printf 'module %s\n\ngo 1.21\n' "$mod" >"$d/go.mod"
		echo "substituted: $mod by an empty module (not compiled in)"
		go mod edit -replace "$mod=./$d"
	elif [ -n "$out" ]; then
		echo "$out" >&2
		exit 1
	else
		echo "$work/pilot-agent-$tag"
		exit 0
	fi
done
echo "gave up after 12 substitutions" >&2
exit 1
