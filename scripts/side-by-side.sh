#!/usr/bin/env bash
# side-by-side.sh: Istio's own pilot-agent and Wingman, each run in a proxyv2-like layout with the
# same environment, flags and files, each handing its Envoy bootstrap to a fake `envoy` that copies
# its -c file (and its arguments) out; then the two bootstraps are compared, normalized.
# Not part of `make test`: it needs an Istio agent binary built from Istio's source at TAG
# (bootstrap/SIDE_BY_SIDE.md says how) and root (each run is in its own network namespace,
# so the agents' fixed ports never meet other processes and the interfaces are the case's).
#
#   scripts/side-by-side.sh ISTIO_AGENT TAG [CASE...]
#
# TAG is the Istio git tag (or "master") the agent was built from: the template is that tag's
# tools/packaging/common/envoy_bootstrap.json, read from ISTIO_GIT_DIR (default
# /work/.mirror/istio+istio/repo) and never stored. Wingman is built with `make build`, stamped
# ISTIO_VERSION=STAMP (default TAG; 1.32.0 for master), unless WINGMAN=path is given.
# Results go to OUT (default /tmp/side-by-side/TAG): per case istio.json, wingman.json (sorted
# keys), *.args, *.log and diff.txt. Exit status 1 when any case differs.
set -euo pipefail

istio_agent=$(realpath "${1:?usage: $0 ISTIO_AGENT TAG [CASE...]}")
tag=${2:?usage: $0 ISTIO_AGENT TAG [CASE...]}
shift 2
git_dir=${ISTIO_GIT_DIR:-/work/.mirror/istio+istio/repo}
stamp=${STAMP:-$tag}
[ "$tag" = master ] && stamp=${STAMP:-1.32.0}
out=${OUT:-/tmp/side-by-side/$tag}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(realpath "$out")

if [ -z "${WINGMAN:-}" ]; then
	WINGMAN=$out/wingman-pilot-agent
	make -C "$repo" --no-print-directory build ISTIO_VERSION="$stamp" BIN="$WINGMAN" >/dev/null
fi
WINGMAN=$(realpath "$WINGMAN")

# Shared fixtures: a root certificate where Istio's agent looks for Istiod's root
# (./var/run/secrets/istio/root-cert.pem, pkg/istio-agent/agent.go FindRootCAForXDS) and the
# files the TLS cases name.
fix=$out/fixtures
if [ ! -f "$fix/root-cert.pem" ]; then
	mkdir -p "$fix"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
		-subj /O=side-by-side -keyout "$fix/root-key.pem" -out "$fix/root-cert.pem" 2>/dev/null
fi

# Each case sets the environment (E), the agent's arguments (ARGS), the interface addresses of its
# network namespace (ADDRS), may give the search line of a resolv.conf bound over /etc/resolv.conf
# in the run's mount namespace (RESOLV_CONF), and may write files into the layout ($layout) in a
# function FILES.
base_env() {
	E=(
		POD_NAME=productpage-v1-6b7f6dc9c8-abcde POD_NAMESPACE=bookinfo SERVICE_ACCOUNT=bookinfo-productpage
		INSTANCE_IP=10.1.2.3 HOST_IP=10.0.0.7 ISTIO_META_CLUSTER_ID=Kubernetes ISTIO_META_MESH_ID=cluster.local
		ISTIO_META_WORKLOAD_NAME=productpage-v1 ISTIO_META_OWNER=kubernetes://apis/apps/v1/namespaces/bookinfo/deployments/productpage-v1
		ISTIO_META_INTERCEPTION_MODE=REDIRECT ISTIO_META_APP_CONTAINERS=productpage
		'ISTIO_META_POD_PORTS=[{"containerPort":9080,"protocol":"TCP"}]'
		'ISTIO_METAJSON_LABELS={"app":"productpage","version":"v1","security.istio.io/tlsMode":"istio","service.istio.io/canonical-name":"productpage","service.istio.io/canonical-revision":"v1"}'
		PILOT_CERT_PROVIDER=istiod CA_ADDR=istiod.istio-system.svc:15012 TRUST_DOMAIN=cluster.local
		ISTIO_CPU_LIMIT=2 ISTIO_META_ENABLE_HBONE=true
	)
	ARGS=(proxy sidecar --domain bookinfo.svc.cluster.local)
	ADDRS=(10.1.2.3/24)
	PC_EXTRA=''
	RESOLV_CONF=''
	FILES() { :; }
}

case_sidecar_ipv4() { :; }
case_sidecar_ipv6() {
	E+=(INSTANCE_IP=fd00::10)
	ADDRS=(fd00::10/64)
}
case_dual_stack() {
	E+=(ISTIO_DUAL_STACK=true)
	ADDRS=(10.1.2.3/24 fd00::10/64)
}
case_dual_stack_ipv6_first() {
	E+=(INSTANCE_IP=fd00::10 ISTIO_DUAL_STACK=true)
	ADDRS=(fd00::10/64 10.1.2.3/24)
}
case_router() {
	E+=(POD_NAME=istio-ingressgateway-5d7c9b6d8-xyz12 POD_NAMESPACE=istio-system SERVICE_ACCOUNT=istio-ingressgateway
		ISTIO_META_WORKLOAD_NAME=istio-ingressgateway ISTIO_META_ROUTER_MODE=sni-dnat
		'ISTIO_METAJSON_LABELS={"app":"istio-ingressgateway","istio":"ingressgateway","service.istio.io/canonical-name":"istio-ingressgateway"}')
	ARGS=(proxy router --domain istio-system.svc.cluster.local)
}
locality_labels='{"app":"reviews","version":"v2","topology.istio.io/locality":"us-east1.us-east1-b.rack1","istio-locality":"us-east1.us-east1-b"}'
case_locality_no_labels_file() {
	E+=("ISTIO_METAJSON_LABELS=$locality_labels")
}
case_locality_labels_file() {
	E+=("ISTIO_METAJSON_LABELS=$locality_labels")
	FILES() {
		mkdir -p etc/istio/pod
		printf '%s\n' 'app="reviews"' 'version="v2"' 'topology.istio.io/locality="us-east1.us-east1-b.rack1"' \
			'istio-locality="us-east1.us-east1-b"' 'pod-template-hash="6b7f6dc9c8"' >etc/istio/pod/labels
	}
}
case_proxy_metadata() {
	PC_EXTRA='"proxyMetadata":{"ISTIO_META_FOO":"bar","ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS":"5000","ISTIO_META_DNS_AUTO_ALLOCATE":"true"},'
}
case_tracing_zipkin_tls() {
	PC_EXTRA='"tracing":{"zipkin":{"address":"zipkin.istio-system:9411"},"sampling":12.5,"maxPathTagLength":99,"tlsSettings":{"mode":"SIMPLE","caCertificates":"/etc/tracing/ca.pem","sni":"zipkin.example","subjectAltNames":["zipkin.example"]},"customTags":{"env":{"literal":{"value":"prod"}}}},'
}
case_metrics_service_tls() {
	PC_EXTRA='"envoyMetricsService":{"address":"ems.monitoring:15000","tlsSettings":{"mode":"MUTUAL","clientCertificate":"/etc/ems/cert.pem","privateKey":"/etc/ems/key.pem","caCertificates":"/etc/ems/ca.pem"},"tcpKeepalive":{"probes":3,"time":"10s","interval":"5s"}},"envoyAccessLogService":{"address":"als.monitoring:15000"},'
}
case_stats_concurrency_drain() {
	PC_EXTRA='"statsCompression":false,"concurrency":3,"drainDuration":"20s","terminationDrainDuration":"7s","statsdUdpAddress":"127.0.0.1:8125","proxyStatsMatcher":{"inclusionPrefixes":["cluster.outbound"],"inclusionRegexps":[".*osconfig.*"]},"statsFlushInterval":"90s","statsEvictionInterval":"180s",'
}
case_statsd_unresolvable() {
	PC_EXTRA='"statsdUdpAddress":"statsd.invalid:8125",'
}
case_annotations_file() {
	FILES() {
		mkdir -p etc/istio/pod
		printf '%s\n' 'sidecar.istio.io/statsInclusionPrefixes="cluster.outbound,listener"' \
			'sidecar.istio.io/statsInclusionSuffixes="upstream_cx_total"' \
			'sidecar.istio.io/statsHistogramBuckets="{\"cluster.inbound\":[1,5,10,50]}"' \
			'sidecar.istio.io/statsCompression="zstd"' 'kubectl.kubernetes.io/default-container="productpage"' \
			'istio.io/rev="default"' >etc/istio/pod/annotations
	}
}
case_gcp_metadata_zone() {
	E+=(CLOUD_PLATFORM=gcp 'GCP_METADATA=my-project|123456789|prod-cluster|us-central1-c' GCP_ZONE=us-central1-f)
}
case_gcp_zone_only() {
	E+=(CLOUD_PLATFORM=gcp GCP_ZONE=us-central1-f)
}
case_gcp_resolv_conf_zone() {
	E+=(CLOUD_PLATFORM=gcp GCP_ZONE=us-central1-f)
	RESOLV_CONF='search bookinfo.svc.cluster.local svc.cluster.local cluster.local us-west1-b.c.test-proj.internal c.test-proj.internal google.internal'
}
case_statsd_localhost() {
	PC_EXTRA='"statsdUdpAddress":"localhost:8125",'
}
case_sts_outlier_datadog() {
	ARGS+=(--stsPort 15463 --outlierLogPath /dev/stdout)
	PC_EXTRA='"tracing":{"datadog":{"address":"$(HOST_IP):8126"}},'
}
case_sotw_self_discovery_secure_metrics() {
	E+=(ISTIO_DELTA_XDS=false ISTIO_META_ENABLE_SELF_DISCOVERY=true ENVOY_SECURE_METRICS_PORT=15091
		ENVOY_SECURE_MERGED_METRICS_PORT=15092 ENVOY_STATUS_PORT_ENABLE_PROXY_PROTOCOL=true)
}
case_mesh_file_and_annotation() {
	FILES() {
		mkdir -p etc/istio/config etc/istio/pod
		printf '%s\n' 'defaultConfig:' '  tracing:' '    sampling: 3' '    zipkin:' '      address: zipkin.mesh:9411' \
			'  proxyMetadata:' '    ISTIO_META_FROM_MESH: "yes"' '  holdApplicationUntilProxyStarts: true' >etc/istio/config/mesh
		printf '%s\n' 'proxy.istio.io/config="{\"tracing\":{\"sampling\":7},\"proxyStatsMatcher\":{\"inclusionSuffixes\":[\"upstream_rq_retry\"]}}"' \
			'sidecar.istio.io/statsInclusionRegexps="http.*"' >etc/istio/pod/annotations
	}
}
case_dns_capture() {
	E+=(ISTIO_META_DNS_CAPTURE=true ISTIO_META_DNS_AUTO_ALLOCATE=true)
}
case_tracers() {
	E+=('GCP_METADATA=my-project|123456789|prod-cluster|us-central1-c')
	PC_EXTRA='"tracing":{"stackdriver":{"debug":true,"maxNumberOfAttributes":50},"sampling":1},'
}
case_opencensus_lightstep() {
	PC_EXTRA='"tracing":{"openCensusAgent":{"address":"oc.monitoring:55678","context":["W3C_TRACE_CONTEXT","B3"]}},'
}
case_bootstrap_override_misc_env() {
	E+=(ISTIO_BOOTSTRAP_OVERRIDE=./etc/istio/custom/override.json EXIT_ON_ZERO_ACTIVE_CONNECTIONS=true
		ISTIO_META_ISTIO_VERSION=1.99.0 HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED=false ISTIO_META_REQUESTED_NETWORK_VIEW=net1,net2
		ISTIO_META_NETWORK=net1 ENVOY_STATUS_PORT=15031 ENVOY_PROMETHEUS_PORT=15099)
	FILES() {
		mkdir -p etc/istio/custom
		echo '{"layered_runtime":{"layers":[{"name":"extra","static_layer":{"overload.global_downstream_max_connections":1234}}]},"stats_config":{"use_all_default_tags":true}}' >etc/istio/custom/override.json
	}
}
case_proxyconfig_kitchen_sink() {
	PC_EXTRA='"runtimeValues":{"re2.max_program_size.error_level":"4096"},"extraStatTags":["app_tag"],"statNameLength":120,"gatewayTopology":{"numTrustedProxies":2},"holdApplicationUntilProxyStarts":true,"proxyHeaders":{"forwardedClientCert":"SANITIZE","server":{"disabled":true},"requestId":{"disabled":true}},"readinessProbe":{"httpGet":{"path":"/healthz/ready","port":15021}},"concurrency":0,'
	FILES() {
		mkdir -p etc/istio/pod
		printf '%s\n' 'proxy.istio.io/config="proxyHeaders:\n  server:\n    value: mine\n  attemptCount:\n    disabled: true\n"' >etc/istio/pod/annotations
	}
}
case_istio_mutual_services() {
	PC_EXTRA='"tracing":{"zipkin":{"address":"zipkin.istio-system:9411"},"tlsSettings":{"mode":"ISTIO_MUTUAL","sni":"zipkin"}},"envoyAccessLogService":{"address":"als.monitoring:15000","tlsSettings":{"mode":"ISTIO_MUTUAL"}},"envoyMetricsService":{"address":"ems.monitoring:15000","tlsSettings":{"mode":"SIMPLE","caCertificates":"/etc/ems/ca.pem","subjectAltNames":["ems.example"]}},'
}
case_template_file_flag() {
	ARGS+=(--templateFile ./etc/istio/custom/bootstrap.tmpl.json)
	FILES() {
		mkdir -p etc/istio/custom
		cat >etc/istio/custom/bootstrap.tmpl.json <<'TMPL'
{"node": {"id": "{{ .nodeID }}", "cluster": "{{ .cluster }}", "locality": {{ .region | toJson }},
 "metadata": {{ .meta_json_str }}},
 "admin": {"address": {"socket_address": {"address": "{{ .localhost }}", "port_value": {{ .config.ProxyAdminPort }}}}},
 "stats_config": {"stats_tags": [{"tag_name": "x", "regex": "{{ .wildcard }}"}]},
 "static_resources": {"clusters": [{"name": "xds-grpc", "type": "STATIC", "load_assignment": {"cluster_name": "xds-grpc",
   "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {"path": "{{ .config.ConfigPath }}/XDS"}}}}]}]}}]},
 "cm": "{{ .config.Concurrency }}", "dd": "{{ .config.DrainDuration }}", "sd": "{{ .config.StatsdUdpAddress }}", "ps": "{{ .pod_name }}"}
TMPL
	}
}

all_cases=(sidecar_ipv4 sidecar_ipv6 dual_stack dual_stack_ipv6_first router locality_no_labels_file
	locality_labels_file proxy_metadata tracing_zipkin_tls metrics_service_tls stats_concurrency_drain
	statsd_unresolvable statsd_localhost annotations_file gcp_metadata_zone gcp_zone_only gcp_resolv_conf_zone
	sts_outlier_datadog sotw_self_discovery_secure_metrics mesh_file_and_annotation dns_capture tracers
	opencensus_lightstep bootstrap_override_misc_env proxyconfig_kitchen_sink istio_mutual_services template_file_flag)
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=("${all_cases[@]}")

# run AGENT NAME CASE_DIR: runs the agent as PID 1 of its own network, mount and PID namespaces (as
# in a pod), in a fresh layout, until the fake envoy has copied the bootstrap (at most 30 s); killing
# unshare then kills the agent and with it every process of its PID namespace.
run() {
	local agent=$1 name=$2 dir=$3 layout
	layout=$(mktemp -d /tmp/sbs-layout.XXXXXX)
	(
		cd "$layout"
		mkdir -p var/lib/istio/envoy etc/istio/proxy var/run/secrets/istio var/run/secrets/tokens usr/local/bin
		git --git-dir="$git_dir" show "$tag:tools/packaging/common/envoy_bootstrap.json" >var/lib/istio/envoy/envoy_bootstrap_tmpl.json
		cp "$fix/root-cert.pem" var/run/secrets/istio/root-cert.pem
		echo token >var/run/secrets/tokens/istio-token
		cat >usr/local/bin/envoy <<EOF
#!/bin/sh
printf '%s\n' "\$@" >"$dir/$name.args.tmp"
while [ \$# -gt 0 ]; do [ "\$1" = -c ] && cp "\$2" "$dir/$name.raw.tmp"; shift; done
mv "$dir/$name.args.tmp" "$dir/$name.args"; mv "$dir/$name.raw.tmp" "$dir/$name.raw"
exec sleep 600
EOF
		chmod +x usr/local/bin/envoy
		FILES
	)
	local pc="{${PC_EXTRA}\"binaryPath\":\"$layout/usr/local/bin/envoy\",\"discoveryAddress\":\"istiod.istio-system.svc:15012\"}"
	local setup="ip link set lo up; ip link add eth0 type dummy; ip link set eth0 up"
	local a
	for a in "${ADDRS[@]}"; do
		case $a in *:*) setup+="; ip -6 addr add $a dev eth0 nodad" ;; *) setup+="; ip addr add $a dev eth0" ;; esac
	done
	if [ -n "$RESOLV_CONF" ]; then
		printf 'nameserver 10.0.0.10\n%s\noptions ndots:5\n' "$RESOLV_CONF" >"$layout/resolv.conf"
		setup+="; mount --bind $layout/resolv.conf /etc/resolv.conf"
	fi
	rm -f "$dir/$name.raw" "$dir/$name.args"
	(cd "$layout" && exec env -i PATH=/usr/bin:/bin HOME=/tmp "${E[@]}" "PROXY_CONFIG=$pc" \
		unshare -n -m -p -f --kill-child sh -c "$setup; exec \"\$0\" \"\$@\"" "$agent" "${ARGS[@]}") \
		>"$dir/$name.log" 2>&1 &
	local pid=$! i
	for i in $(seq 300); do
		[ -f "$dir/$name.raw" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$layout"
	if [ ! -f "$dir/$name.raw" ]; then
		echo "  $name: no bootstrap reached envoy (see $dir/$name.log)"
		return 1
	fi
	# Envoy's parser accepts a trailing comma, which Istio's own template writes (PARITY.md 1);
	# drop it before sorting keys. The layout's temporary path is written as LAYOUT.
	sed -e "s#$layout#LAYOUT#g" "$dir/$name.raw" | python3 -c '
import json, re, sys
text = re.sub(r",(\s*[}\]])", r"\1", sys.stdin.read())
print(json.dumps(json.loads(text), indent=1, sort_keys=True))' >"$dir/$name.json"
	sed -e "s#$layout#LAYOUT#g" "$dir/$name.args" >"$dir/$name.args.norm"
}

status=0
for c in "${cases[@]}"; do
	dir=$out/$c
	mkdir -p "$dir"
	base_env
	"case_$c"
	echo "== $c ($tag, Wingman stamped $stamp)"
	run "$istio_agent" istio "$dir" || { status=1; continue; }
	run "$WINGMAN" wingman "$dir" || { status=1; continue; }
	if diff -u "$dir/istio.json" "$dir/wingman.json" >"$dir/diff.txt" &&
		diff -u "$dir/istio.args.norm" "$dir/wingman.args.norm" >>"$dir/diff.txt"; then
		echo "  same bootstrap and envoy arguments"
	else
		status=1
		echo "  DIFFERENT ($dir/diff.txt):"
		grep '^[-+][^-+]' "$dir/diff.txt" | head -20 | sed 's/^/    /'
	fi
done
exit $status
