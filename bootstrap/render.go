package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/wingman-mesh/wingman/internal/environ"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// Render produces the Envoy bootstrap JSON for cfg (Istio's default template, as typed values).
// ctx bounds what the render waits for (the statsd host lookup).
func Render(ctx context.Context, cfg Config) ([]byte, error) {
	b, err := Build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Written without reflection (jsonw.go), byte for byte as json.MarshalIndent(b, "", "  ").
	out, err := appendIndented(make([]byte, 0, renderBufSize), b)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: marshal: %w", err)
	}
	return out, nil
}

// renderBufSize holds a typical bootstrap in one allocation (the goldens are 16-22 KB).
const renderBufSize = 24 << 10

// Build returns the typed bootstrap for cfg; Render marshals it.
func Build(ctx context.Context, cfg Config) (*Bootstrap, error) {
	st, err := newState(cfg)
	if err != nil {
		return nil, err
	}
	return st.build(ctx)
}

// state is what one render derives from Config before building; immutable once newState returns.
type state struct {
	cfg        Config
	pc         *meshapi.ProxyConfig
	ips        []string
	family     Family
	nodeID     string
	cluster    string
	locality   *Locality
	meta       *Metadata
	metaJSON   json.RawMessage
	localhost  string
	wildcard   string
	additional string // the other family's wildcard when dual stack is on
	dnsFamily  string
	xdsType    string
	discovery  bool // metadata discovery in effect (needs delta)
	release    Release
}

func newState(cfg Config) (*state, error) {
	if cfg.ProxyConfig == nil {
		return nil, fmt.Errorf("bootstrap: Config.ProxyConfig is nil")
	}
	if !cfg.NodeType.Valid() {
		return nil, fmt.Errorf("bootstrap: node type %q: want one of %v", cfg.NodeType, NodeTypes)
	}
	if cfg.PodNamespace == "" {
		return nil, fmt.Errorf("bootstrap: POD_NAMESPACE is empty")
	}
	for name, p := range map[string]int{"ENVOY_STATUS_PORT": cfg.EnvoyStatusPort, "ENVOY_PROMETHEUS_PORT": cfg.EnvoyPrometheusPort} {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("bootstrap: %s %d is outside 1-65535", name, p)
		}
	}
	addrs, err := parseIPs(cfg.IPs)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	ips := make([]string, 0, len(addrs))
	for _, a := range addrs { // Istio drops repeated addresses (removeDuplicates)
		if s := a.String(); !slices.Contains(ips, s) {
			ips = append(ips, s)
		}
	}
	rel, _ := ReleaseOf(cfg.IstioVersion)
	if !rel.secureMetricsAndSelfDiscovery() {
		// Releases before 1.31 read neither variable (pilot-agent options at 1.30.3).
		cfg.EnvoySecureMetricsPort, cfg.EnvoySecureMergedMetricsPort = 0, 0
	}
	st := &state{cfg: cfg, pc: cfg.ProxyConfig, ips: ips, family: AddressFamily(ips, cfg.DualStack), release: rel}
	st.nodeID = NodeID(cfg.NodeType, ips[0], cfg.PodName, cfg.PodNamespace, cfg.domain())
	if st.meta, err = NodeMetadata(cfg, ips); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if st.metaJSON, err = st.meta.MarshalJSON(); err != nil {
		return nil, fmt.Errorf("bootstrap: node metadata: %w", err)
	}
	st.cluster = serviceCluster(st.pc, st.meta, cfg.PodNamespace, rel)
	st.locality = locality(st.meta.Labels, cfg.PlatformLocality)

	st.localhost, st.wildcard, st.dnsFamily = st.family.Localhost, st.family.Wildcard, st.family.DNSLookupFamily
	st.additional = st.family.AdditionalWildcard
	// Waypoints always speak Delta xDS and discover peer metadata (Istio's toTemplateParams);
	// metadata discovery is off on SotW.
	st.xdsType = "GRPC"
	st.discovery = st.meta.MetadataDiscovery != nil && bool(*st.meta.MetadataDiscovery)
	if cfg.Delta || cfg.NodeType == Waypoint {
		st.xdsType = "DELTA_GRPC"
	}
	if cfg.NodeType == Waypoint {
		st.discovery = true
	}
	st.discovery = st.discovery && st.xdsType == "DELTA_GRPC"
	return st, nil
}

func (st *state) build(ctx context.Context) (*Bootstrap, error) {
	stats, err := st.statsConfig()
	if err != nil {
		return nil, err
	}
	b := &Bootstrap{
		Node: &Node{ID: st.nodeID, Cluster: st.cluster, Locality: st.locality, Metadata: st.metaJSON},
		LayeredRuntime: &LayeredRuntime{Layers: []RuntimeLayer{
			{Name: "global config", StaticLayer: st.runtimeFlags()},
			{Name: "admin", AdminLayer: &struct{}{}},
		}},
		BootstrapExtensions: st.bootstrapExtensions(),
		StatsConfig:         stats,
		Admin: &Admin{
			AccessLog:   []TypedExtension{{Name: "envoy.access_loggers.file", TypedConfig: map[string]string{"@type": typeFileAccessLog, "path": "/dev/null"}}},
			ProfilePath: DefaultProfilePath,
			Address:     socketAddr("", st.localhost, uint32(st.pc.GetProxyAdminPort())),
		},
		DynamicResources: &DynamicResources{
			LdsConfig: adsSource(),
			CdsConfig: adsSource(),
			AdsConfig: ApiConfigSource{
				APIType: st.xdsType, SetNodeOnFirstMessageOnly: true, TransportAPIVersion: "V3",
				GRPCServices: []GRPCService{{EnvoyGRPC: EnvoyGRPC{ClusterName: "xds-grpc"}}},
			},
		},
		OverloadManager:      st.overloadManager(),
		ApplicationLogConfig: st.appLogConfig(),
		DeferredStatOptions:  &DeferredStatOptions{EnableDeferredCreationStats: true},
	}
	if err := st.statsIntervals(b); err != nil {
		return nil, err
	}
	clusters := st.staticClusters()
	tr, trCluster, err := st.tracing()
	if err != nil {
		return nil, err
	}
	if tr != nil {
		b.Tracing = tr
		clusters = append(clusters, *trCluster)
	}
	sinks, sinkClusters, err := st.statsSinks(ctx)
	if err != nil {
		return nil, err
	}
	b.StatsSinks = sinks
	clusters = append(clusters, sinkClusters...)
	b.StaticResources = &StaticResources{Clusters: clusters, Listeners: st.listeners()}
	b.ClusterManager = st.clusterManager()
	return b, nil
}

func adsSource() ConfigSource {
	return ConfigSource{Ads: &struct{}{}, InitialFetchTimeout: "0s", ResourceAPIVersion: "V3"}
}

func socketAddr(proto, host string, port uint32) Address {
	return Address{SocketAddress: &SocketAddress{Protocol: proto, Address: host, PortValue: port}}
}

func staticCluster(name, connectTimeout string, addr Address) Cluster {
	return Cluster{
		Name: name, Type: "STATIC", ConnectTimeout: connectTimeout, LbPolicy: "ROUND_ROBIN",
		LoadAssignment: &ClusterLoadAssign{ClusterName: name, Endpoints: []LocalityEndpoint{{LbEndpoints: []LbEndpoint{{Endpoint: Endpoint{Address: addr}}}}}},
	}
}

func http2Options() map[string]any {
	return map[string]any{httpOptionsKey: map[string]any{
		"@type":                typeHTTPOptions,
		"explicit_http_config": map[string]any{"http2_protocol_options": map[string]any{}},
	}}
}

func (st *state) staticClusters() []Cluster {
	prom := staticCluster("prometheus_stats", "0.250s", socketAddr("TCP", st.localhost, uint32(st.pc.GetProxyAdminPort())))
	agent := staticCluster("agent", "0.250s", socketAddr("TCP", st.localhost, uint32(st.pc.GetStatusPort())))
	sds := staticCluster("sds-grpc", "1s", Address{Pipe: &Pipe{Path: st.cfg.sdsSocket()}})
	sds.TypedExtensionProtocolOptions = http2Options()
	xds := staticCluster("xds-grpc", "1s", Address{Pipe: &Pipe{Path: st.cfg.xdsSocket()}})
	xds.TypedExtensionProtocolOptions = http2Options()
	xds.CircuitBreakers = &CircuitBreakers{Thresholds: []Thresholds{
		{Priority: "DEFAULT", MaxConnections: 100000, MaxPendingRequests: 100000, MaxRequests: 100000},
		{Priority: "HIGH", MaxConnections: 100000, MaxPendingRequests: 100000, MaxRequests: 100000},
	}}
	xds.UpstreamConnectionOptions = &UpstreamConnOpts{TCPKeepalive: &TCPKeepalive{KeepaliveTime: 300}}
	xds.MaxRequestsPerConnection = 1
	out := []Cluster{prom, agent, sds}
	if st.cfg.FileCredential {
		files := staticCluster("sds-files-grpc", "1s", Address{Pipe: &Pipe{Path: DefaultCredentialFilesSocket}})
		files.TypedExtensionProtocolOptions = http2Options()
		out = append(out, files)
	}
	out = append(out, xds)
	// With the ';'-delimited tag scheme the cluster_name tag ends at ';': Istio names the stats
	// of its static clusters "<name>;".
	for i := range out {
		out[i].AltStatName = out[i].Name + ";"
	}
	if st.selfDiscovery() {
		out = append(out, st.localCluster())
	}
	return out
}

// selfDiscovery is ISTIO_META_ENABLE_SELF_DISCOVERY: the proxy learns its own service's endpoints
// as local_cluster, the cluster_manager's local cluster for zone-aware load balancing.
func (st *state) selfDiscovery() bool {
	return st.release.secureMetricsAndSelfDiscovery() && bool(st.meta.EnableSelfDiscovery)
}

// localClusterName is pilot's xds.LocalClusterName.
const localClusterName = "local_cluster"

// localCluster is the self-discovery cluster: endpoints from Istiod over ADS (EDS resource
// "local_cluster"), least-request balancing that is zone aware from one endpoint on
// (zone_aware_lb_config.min_cluster_size 1: with lb_policy LEAST_REQUEST Envoy's default of 6
// applies), and an EDS source without initial_fetch_timeout, as Istio's template renders it.
func (st *state) localCluster() Cluster {
	c := Cluster{
		Name: localClusterName, Type: "EDS", ConnectTimeout: "1s",
		LoadBalancingPolicy: map[string]any{"policies": []any{map[string]any{
			"typed_extension_config": map[string]any{
				"name": "envoy.load_balancing_policies.least_request",
				"typed_config": map[string]any{
					"@type":              typeLeastRequest,
					"locality_lb_config": map[string]any{"zone_aware_lb_config": map[string]any{"min_cluster_size": "1"}}, // a string in the template
				},
			},
		}}},
		EdsClusterConfig: &EdsClusterConfig{EdsConfig: ConfigSource{Ads: &struct{}{}, ResourceAPIVersion: "V3"}, ServiceName: localClusterName},
	}
	c.AltStatName = localClusterName + ";"
	return c
}

func (st *state) listenerAddrs(host string, port uint32) (Address, []AdditionalAddress) {
	main := socketAddr("TCP", host, port)
	if st.additional == "" {
		return main, nil
	}
	return main, []AdditionalAddress{{Address: socketAddr("TCP", st.additional, port)}}
}

func hcm(statPrefix, pathPrefix, cluster string, filters []TypedExtension) TypedExtension {
	return hcmRoutes(statPrefix, []Route{{Match: RouteMatch{Prefix: pathPrefix}, Route: RouteAction{Cluster: cluster}}}, filters)
}

func hcmRoutes(statPrefix string, routes []Route, filters []TypedExtension) TypedExtension {
	filters = append(filters, TypedExtension{Name: "envoy.filters.http.router", TypedConfig: map[string]string{"@type": typeRouter}})
	return TypedExtension{Name: "envoy.filters.network.http_connection_manager", TypedConfig: HTTPConnectionManager{
		Type: typeHCM, CodecType: "AUTO", StatPrefix: statPrefix,
		RouteConfig: RouteConfig{VirtualHosts: []VirtualHost{{Name: "backend", Domains: []string{"*"}, Routes: routes}}},
		HTTPFilters: filters,
	}}
}

// compressor is one of the 15090 listener's compressors as Istio's template writes them from
// 1.29.0 (envoy_bootstrap.json at 1.29.6 .. master): library stats_<algo>, responses of the
// Prometheus and protobuf stats content types.
func compressor(algo, libType string) TypedExtension {
	return TypedExtension{Name: "envoy.filters.http.compressor." + algo, TypedConfig: map[string]any{
		"@type":              typeCompressor,
		"compressor_library": map[string]any{"name": "stats_" + algo, "typed_config": map[string]string{"@type": libType}},
		"response_direction_config": map[string]any{"common_config": map[string]any{"content_type": []string{
			"text/plain", "application/vnd.google.protobuf", "application/openmetrics-text", "application/openmetrics-protobuf",
		}}},
	}}
}

func (st *state) listeners() []Listener {
	promHost := st.wildcard
	if st.pc.GetProxyMetadata()["METRICS_LOCALHOST_ACCESS_ONLY"] == "true" {
		promHost = st.localhost
	}
	var compressors []TypedExtension
	if st.statsCompressed() { // the template's order: brotli, zstd, gzip
		compressors = []TypedExtension{compressor("brotli", typeBrotli), compressor("zstd", typeZstd), compressor("gzip", typeGzip)}
	}
	promPort := uint32(st.cfg.EnvoyPrometheusPort)
	addr, extra := st.listenerAddrs(promHost, promPort)
	if promHost == st.localhost && extra != nil {
		// METRICS_LOCALHOST_ACCESS_ONLY: the other family's localhost (the template's
		// additional_localhost), not its wildcard.
		extra = []AdditionalAddress{{Address: socketAddr("TCP", st.family.AdditionalLocalhost, promPort)}}
	}
	prom := Listener{
		Name: listenerName(promHost, promPort), Address: addr, AdditionalAddresses: extra,
		FilterChains:          []FilterChain{{Filters: []TypedExtension{hcm("stats", "/stats/prometheus", "prometheus_stats", compressors)}}},
		IgnoreGlobalConnLimit: true, BypassOverloadManager: true,
	}
	statusPort := uint32(st.cfg.EnvoyStatusPort)
	addr, extra = st.listenerAddrs(st.wildcard, statusPort)
	status := Listener{
		Name: listenerName(st.wildcard, statusPort), Address: addr, AdditionalAddresses: extra,
		FilterChains:          []FilterChain{{Filters: []TypedExtension{hcm("agent", "/healthz/ready", "agent", nil)}}},
		IgnoreGlobalConnLimit: true, BypassOverloadManager: true,
	}
	if st.cfg.StatusPortProxyProtocol {
		// The template's filter name and its allow_requests_without_proxy_protocol (1.28.10 ..
		// master).
		status.ListenerFilters = []TypedExtension{{Name: "envoy.listener.proxy_protocol", TypedConfig: map[string]any{
			"@type": typeProxyProtocol, "allow_requests_without_proxy_protocol": true,
		}}}
	}
	// The template's order: Prometheus, the secure metrics listeners, status.
	out := append([]Listener{prom}, st.secureMetricsListeners()...)
	return append(out, status)
}

// statsCompressed is ProxyConfig statsCompression, true unless set false.
func (st *state) statsCompressed() bool {
	sc := st.pc.GetStatsCompression()
	return sc == nil || sc.GetValue()
}

func listenerName(host string, port uint32) string { return host + "_" + strconv.Itoa(int(port)) }

func (st *state) bootstrapExtensions() []TypedExtension {
	var out []TypedExtension
	if st.discovery {
		out = append(out, TypedExtension{Name: "metadata_discovery", TypedConfig: TypedStruct{
			Type: typeTypedStruct, TypeURL: "type.googleapis.com/istio.workload.BootstrapExtension",
			Value: map[string]any{"config_source": map[string]any{"ads": map[string]any{}}},
		}})
	}
	return append(out, TypedExtension{Name: "envoy.bootstrap.internal_listener", TypedConfig: TypedStruct{
		Type: typeTypedStruct, TypeURL: "type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener",
		Value: map[string]any{"buffer_size_kb": 64},
	}})
}

func (st *state) clusterManager() *ClusterManager {
	lrs, _ := st.meta.Raw["LOAD_STATS_CONFIG_JSON"].(string)
	self := st.selfDiscovery()
	// The template writes cluster_manager only with an outlier log path, an LRS config or self
	// discovery (envoy_bootstrap.json, master; 1.28.10 .. 1.30.3 without self discovery).
	if st.cfg.OutlierLogPath == "" && lrs == "" && !self {
		return nil
	}
	cm := &ClusterManager{EnableDeferredClusterCreation: true}
	if st.cfg.OutlierLogPath != "" {
		cm.OutlierDetection = &OutlierDetection{EventLogPath: st.cfg.OutlierLogPath}
	}
	if lrs != "" && json.Valid([]byte(lrs)) {
		cm.LoadStatsConfig = json.RawMessage(lrs)
	}
	if self {
		cm.LocalClusterName = localClusterName
	}
	return cm
}

func (st *state) appLogConfig() *ApplicationLogConfig {
	if st.cfg.LogAsJSON {
		return &ApplicationLogConfig{LogFormat: LogFormat{JSONFormat: map[string]string{
			"time": "%Y-%m-%dT%T.%fZ", "level": "%l", "scope": "envoy %n", "msg": "%j", "caller": "%g:%#", "thread": "%t",
		}}}
	}
	return &ApplicationLogConfig{LogFormat: LogFormat{TextFormat: "%Y-%m-%dT%T.%fZ\t%l\tenvoy %n %g:%#\t%v\tthread=%t"}}
}

// hostPort splits a ProxyConfig host:port after $(HOST_IP) substitution, for a cluster address.
func (st *state) hostPort(field, addr string) (*SocketAddress, error) {
	addr = SubstituteHostIP(addr, st.cfg.Env)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: ProxyConfig field %s %q: %w", field, addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, fmt.Errorf("bootstrap: ProxyConfig field %s %q: bad port", field, addr)
	}
	return &SocketAddress{Address: host, PortValue: uint32(p)}, nil
}

// SubstituteHostIP replaces $(HOST_IP) with HOST_IP from env (bracketed when IPv6, for host:port use).
func SubstituteHostIP(s string, env []string) string {
	if !strings.Contains(s, "$(HOST_IP)") {
		return s
	}
	ip, _ := environ.Lookup(env, "HOST_IP")
	if strings.Contains(ip, ":") {
		ip = "[" + ip + "]"
	}
	return strings.ReplaceAll(s, "$(HOST_IP)", ip)
}
