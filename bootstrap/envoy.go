package bootstrap

import "encoding/json"

// The types below are the part of Envoy's config.bootstrap.v3.Bootstrap that the agent renders,
// named and shaped like Envoy's proto JSON (snake_case). They are plain values: marshalling them
// costs no proto registry. envoyproto.Validate parses the output into Envoy's own protos in tests
// (every golden) and in `pilot-agent bootstrap --validate`.

// Type URLs of the typed configs rendered.
const (
	typeHCM             = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
	typeRouter          = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
	typeCompressor      = "type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor"
	typeGzip            = "type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip"
	typeBrotli          = "type.googleapis.com/envoy.extensions.compression.brotli.compressor.v3.Brotli"
	typeZstd            = "type.googleapis.com/envoy.extensions.compression.zstd.compressor.v3.Zstd"
	typeFileAccessLog   = "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog"
	typeHTTPOptions     = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	typeTypedStruct     = "type.googleapis.com/udpa.type.v1.TypedStruct"
	typeProxyProtocol   = "type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol"
	typeDownstreamConns = "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig"
	typeZipkin          = "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig"
	typeLightstep       = "type.googleapis.com/envoy.config.trace.v3.LightstepConfig"
	typeDatadog         = "type.googleapis.com/envoy.config.trace.v3.DatadogConfig"
	typeMetricsService  = "type.googleapis.com/envoy.config.metrics.v3.MetricsServiceConfig"
	typeStatsd          = "type.googleapis.com/envoy.config.metrics.v3.StatsdSink"
	typeUpstreamTLS     = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
	typeLeastRequest    = "type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest"
	typeTLSInspector    = "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"
	httpOptionsKey      = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// Bootstrap is envoy.config.bootstrap.v3.Bootstrap (the rendered subset).
type Bootstrap struct {
	Node                  *Node                 `json:"node"`
	LayeredRuntime        *LayeredRuntime       `json:"layered_runtime,omitempty"`
	BootstrapExtensions   []TypedExtension      `json:"bootstrap_extensions,omitempty"`
	StatsConfig           *StatsConfig          `json:"stats_config,omitempty"`
	Admin                 *Admin                `json:"admin,omitempty"`
	DynamicResources      *DynamicResources     `json:"dynamic_resources,omitempty"`
	StaticResources       *StaticResources      `json:"static_resources,omitempty"`
	Tracing               *Tracing              `json:"tracing,omitempty"`
	StatsSinks            []TypedExtension      `json:"stats_sinks,omitempty"`
	ClusterManager        *ClusterManager       `json:"cluster_manager,omitempty"`
	OverloadManager       *OverloadManager      `json:"overload_manager,omitempty"`
	ApplicationLogConfig  *ApplicationLogConfig `json:"application_log_config,omitempty"`
	DeferredStatOptions   *DeferredStatOptions  `json:"deferred_stat_options,omitempty"`
	StatsFlushInterval    string                `json:"stats_flush_interval,omitempty"`
	StatsEvictionInterval string                `json:"stats_eviction_interval,omitempty"`
}

// Node is envoy.config.core.v3.Node.
type Node struct {
	ID       string          `json:"id"`
	Cluster  string          `json:"cluster"`
	Locality *Locality       `json:"locality,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Locality is envoy.config.core.v3.Locality.
type Locality struct {
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	SubZone string `json:"sub_zone,omitempty"`
}

// TypedExtension is envoy.config.core.v3.TypedExtensionConfig (and the name+typed_config shape of
// filters, sinks, tracers and access loggers).
type TypedExtension struct {
	Name        string `json:"name"`
	TypedConfig any    `json:"typed_config,omitempty"`
}

// TypedStruct is udpa.type.v1.TypedStruct inside an Any.
type TypedStruct struct {
	Type    string         `json:"@type"`
	TypeURL string         `json:"type_url"`
	Value   map[string]any `json:"value"`
}

// LayeredRuntime is envoy.config.bootstrap.v3.LayeredRuntime.
type LayeredRuntime struct {
	Layers []RuntimeLayer `json:"layers"`
}

// RuntimeLayer is one runtime layer: static or admin.
type RuntimeLayer struct {
	Name        string         `json:"name"`
	StaticLayer map[string]any `json:"static_layer,omitempty"`
	AdminLayer  *struct{}      `json:"admin_layer,omitempty"`
}

// StatsConfig is envoy.config.metrics.v3.StatsConfig.
type StatsConfig struct {
	UseAllDefaultTags       bool                      `json:"use_all_default_tags"`
	StatsTags               []TagSpecifier            `json:"stats_tags,omitempty"`
	StatsMatcher            *StatsMatcher             `json:"stats_matcher,omitempty"`
	HistogramBucketSettings []HistogramBucketSettings `json:"histogram_bucket_settings,omitempty"`
}

// TagSpecifier is envoy.config.metrics.v3.TagSpecifier.
type TagSpecifier struct {
	TagName string `json:"tag_name"`
	Regex   string `json:"regex"`
}

// StatsMatcher is envoy.config.metrics.v3.StatsMatcher with an inclusion list.
type StatsMatcher struct {
	InclusionList ListStringMatcher `json:"inclusion_list"`
}

// ListStringMatcher is envoy.type.matcher.v3.ListStringMatcher.
type ListStringMatcher struct {
	Patterns []StringMatcher `json:"patterns"`
}

// StringMatcher is envoy.type.matcher.v3.StringMatcher (one of the members is set).
type StringMatcher struct {
	Prefix    string        `json:"prefix,omitempty"`
	Suffix    string        `json:"suffix,omitempty"`
	SafeRegex *RegexMatcher `json:"safe_regex,omitempty"`
}

// RegexMatcher is envoy.type.matcher.v3.RegexMatcher.
type RegexMatcher struct {
	Regex string `json:"regex"`
}

// HistogramBucketSettings is envoy.config.metrics.v3.HistogramBucketSettings.
type HistogramBucketSettings struct {
	Match   StringMatcher `json:"match"`
	Buckets []float64     `json:"buckets"`
}

// Admin is envoy.config.bootstrap.v3.Admin.
type Admin struct {
	AccessLog   []TypedExtension `json:"access_log,omitempty"`
	ProfilePath string           `json:"profile_path,omitempty"`
	Address     Address          `json:"address"`
}

// Address is envoy.config.core.v3.Address (socket or pipe).
type Address struct {
	SocketAddress *SocketAddress `json:"socket_address,omitempty"`
	Pipe          *Pipe          `json:"pipe,omitempty"`
}

// SocketAddress is envoy.config.core.v3.SocketAddress.
type SocketAddress struct {
	Protocol  string `json:"protocol,omitempty"`
	Address   string `json:"address"`
	PortValue uint32 `json:"port_value"`
}

// Pipe is envoy.config.core.v3.Pipe.
type Pipe struct {
	Path string `json:"path"`
}

// DynamicResources is envoy.config.bootstrap.v3.Bootstrap.DynamicResources.
type DynamicResources struct {
	LdsConfig ConfigSource    `json:"lds_config"`
	CdsConfig ConfigSource    `json:"cds_config"`
	AdsConfig ApiConfigSource `json:"ads_config"`
}

// ConfigSource is envoy.config.core.v3.ConfigSource (ADS form).
type ConfigSource struct {
	Ads                 *struct{} `json:"ads,omitempty"`
	InitialFetchTimeout string    `json:"initial_fetch_timeout,omitempty"`
	ResourceAPIVersion  string    `json:"resource_api_version,omitempty"`
}

// ApiConfigSource is envoy.config.core.v3.ApiConfigSource.
type ApiConfigSource struct {
	APIType                   string        `json:"api_type"`
	SetNodeOnFirstMessageOnly bool          `json:"set_node_on_first_message_only,omitempty"`
	TransportAPIVersion       string        `json:"transport_api_version,omitempty"`
	GRPCServices              []GRPCService `json:"grpc_services"`
}

// GRPCService is envoy.config.core.v3.GrpcService (Envoy gRPC form).
type GRPCService struct {
	EnvoyGRPC EnvoyGRPC `json:"envoy_grpc"`
}

// EnvoyGRPC names the static cluster a gRPC service uses.
type EnvoyGRPC struct {
	ClusterName string `json:"cluster_name"`
}

// StaticResources is envoy.config.bootstrap.v3.Bootstrap.StaticResources.
type StaticResources struct {
	Clusters  []Cluster  `json:"clusters"`
	Listeners []Listener `json:"listeners,omitempty"`
}

// Cluster is envoy.config.cluster.v3.Cluster (the rendered subset).
type Cluster struct {
	Name                          string             `json:"name"`
	AltStatName                   string             `json:"alt_stat_name,omitempty"`
	Type                          string             `json:"type"`
	ConnectTimeout                string             `json:"connect_timeout"`
	LbPolicy                      string             `json:"lb_policy,omitempty"`
	LoadBalancingPolicy           any                `json:"load_balancing_policy,omitempty"`
	RespectDNSTTL                 bool               `json:"respect_dns_ttl,omitempty"`
	DNSLookupFamily               string             `json:"dns_lookup_family,omitempty"`
	DNSRefreshRate                string             `json:"dns_refresh_rate,omitempty"`
	TransportSocket               *TypedExtension    `json:"transport_socket,omitempty"`
	TypedExtensionProtocolOptions map[string]any     `json:"typed_extension_protocol_options,omitempty"`
	CircuitBreakers               *CircuitBreakers   `json:"circuit_breakers,omitempty"`
	UpstreamConnectionOptions     *UpstreamConnOpts  `json:"upstream_connection_options,omitempty"`
	MaxRequestsPerConnection      uint32             `json:"max_requests_per_connection,omitempty"`
	LoadAssignment                *ClusterLoadAssign `json:"load_assignment,omitempty"`
	EdsClusterConfig              *EdsClusterConfig  `json:"eds_cluster_config,omitempty"`
}

// EdsClusterConfig is envoy.config.cluster.v3.Cluster.EdsClusterConfig.
type EdsClusterConfig struct {
	EdsConfig   ConfigSource `json:"eds_config"`
	ServiceName string       `json:"service_name,omitempty"`
}

// CircuitBreakers is envoy.config.cluster.v3.CircuitBreakers.
type CircuitBreakers struct {
	Thresholds []Thresholds `json:"thresholds"`
}

// Thresholds is envoy.config.cluster.v3.CircuitBreakers.Thresholds.
type Thresholds struct {
	Priority           string `json:"priority"`
	MaxConnections     uint32 `json:"max_connections"`
	MaxPendingRequests uint32 `json:"max_pending_requests"`
	MaxRequests        uint32 `json:"max_requests"`
}

// UpstreamConnOpts is envoy.config.cluster.v3.UpstreamConnectionOptions.
type UpstreamConnOpts struct {
	// TCPKeepalive is a *TCPKeepalive (plain numbers, as Istio's template writes xds-grpc's) or
	// the wrapper form Istio's keepaliveConverter writes for the metrics and access log services.
	TCPKeepalive any `json:"tcp_keepalive"`
}

// TCPKeepalive is envoy.config.core.v3.TcpKeepalive.
type TCPKeepalive struct {
	KeepaliveProbes   uint32 `json:"keepalive_probes,omitempty"`
	KeepaliveTime     uint32 `json:"keepalive_time,omitempty"`
	KeepaliveInterval uint32 `json:"keepalive_interval,omitempty"`
}

// ClusterLoadAssign is envoy.config.endpoint.v3.ClusterLoadAssignment with one endpoint.
type ClusterLoadAssign struct {
	ClusterName string             `json:"cluster_name"`
	Endpoints   []LocalityEndpoint `json:"endpoints"`
}

// LocalityEndpoint is envoy.config.endpoint.v3.LocalityLbEndpoints.
type LocalityEndpoint struct {
	LbEndpoints []LbEndpoint `json:"lb_endpoints"`
}

// LbEndpoint is envoy.config.endpoint.v3.LbEndpoint.
type LbEndpoint struct {
	Endpoint Endpoint `json:"endpoint"`
}

// Endpoint is envoy.config.endpoint.v3.Endpoint.
type Endpoint struct {
	Address Address `json:"address"`
}

// Listener is envoy.config.listener.v3.Listener (the rendered subset).
type Listener struct {
	Name                  string              `json:"name"`
	Address               Address             `json:"address"`
	AdditionalAddresses   []AdditionalAddress `json:"additionalAddresses,omitempty"` // the template's spelling (Envoy reads both)
	ListenerFilters       []TypedExtension    `json:"listener_filters,omitempty"`
	FilterChains          []FilterChain       `json:"filter_chains"`
	IgnoreGlobalConnLimit bool                `json:"ignore_global_conn_limit,omitempty"`
	BypassOverloadManager bool                `json:"bypass_overload_manager,omitempty"`
}

// AdditionalAddress is envoy.config.listener.v3.AdditionalAddress.
type AdditionalAddress struct {
	Address Address `json:"address"`
}

// FilterChain is envoy.config.listener.v3.FilterChain.
type FilterChain struct {
	FilterChainMatch *FilterChainMatch `json:"filter_chain_match,omitempty"`
	Filters          []TypedExtension  `json:"filters"`
	TransportSocket  *TypedExtension   `json:"transport_socket,omitempty"`
}

// FilterChainMatch is envoy.config.listener.v3.FilterChainMatch (the rendered subset).
type FilterChainMatch struct {
	TransportProtocol string `json:"transport_protocol,omitempty"`
}

// HTTPConnectionManager is the HttpConnectionManager typed config of the static listeners.
type HTTPConnectionManager struct {
	Type        string           `json:"@type"`
	CodecType   string           `json:"codec_type"`
	StatPrefix  string           `json:"stat_prefix"`
	RouteConfig RouteConfig      `json:"route_config"`
	HTTPFilters []TypedExtension `json:"http_filters"`
}

// RouteConfig is envoy.config.route.v3.RouteConfiguration (inline).
type RouteConfig struct {
	VirtualHosts []VirtualHost `json:"virtual_hosts"`
}

// VirtualHost is envoy.config.route.v3.VirtualHost.
type VirtualHost struct {
	Name    string   `json:"name"`
	Domains []string `json:"domains"`
	Routes  []Route  `json:"routes"`
}

// Route is envoy.config.route.v3.Route (prefix to cluster).
type Route struct {
	Match RouteMatch  `json:"match"`
	Route RouteAction `json:"route"`
}

// RouteMatch is envoy.config.route.v3.RouteMatch.
type RouteMatch struct {
	Prefix string `json:"prefix"`
}

// RouteAction is envoy.config.route.v3.RouteAction.
type RouteAction struct {
	Cluster string `json:"cluster"`
}

// Tracing is envoy.config.trace.v3.Tracing.
type Tracing struct {
	HTTP TypedExtension `json:"http"`
}

// ClusterManager is envoy.config.bootstrap.v3.ClusterManager.
type ClusterManager struct {
	LocalClusterName              string            `json:"local_cluster_name,omitempty"`
	OutlierDetection              *OutlierDetection `json:"outlier_detection,omitempty"`
	LoadStatsConfig               json.RawMessage   `json:"load_stats_config,omitempty"`
	EnableDeferredClusterCreation bool              `json:"enable_deferred_cluster_creation,omitempty"`
}

// OutlierDetection is envoy.config.bootstrap.v3.ClusterManager.OutlierDetection.
type OutlierDetection struct {
	EventLogPath string `json:"event_log_path"`
}

// OverloadManager is envoy.config.overload.v3.OverloadManager.
type OverloadManager struct {
	ResourceMonitors []TypedExtension `json:"resource_monitors"`
}

// ApplicationLogConfig is envoy.config.bootstrap.v3.Bootstrap.ApplicationLogConfig.
type ApplicationLogConfig struct {
	LogFormat LogFormat `json:"log_format"`
}

// LogFormat is ApplicationLogConfig.LogFormat (one member set).
type LogFormat struct {
	TextFormat string            `json:"text_format,omitempty"`
	JSONFormat map[string]string `json:"json_format,omitempty"`
}

// DeferredStatOptions is envoy.config.bootstrap.v3.Bootstrap.DeferredStatOptions.
type DeferredStatOptions struct {
	EnableDeferredCreationStats bool `json:"enable_deferred_creation_stats"`
}
