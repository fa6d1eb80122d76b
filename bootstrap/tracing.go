package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

func (st *state) logger() *slog.Logger {
	if st.cfg.Logger != nil {
		return st.cfg.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// tracing renders the tracer ProxyConfig selects and its collector cluster.
func (st *state) tracing() (*Tracing, *Cluster, error) {
	t := st.pc.GetTracing()
	if t == nil {
		return nil, nil, nil
	}
	var (
		name, clusterName, field, addr string
		cfg                            map[string]any
		h2                             bool
	)
	switch tr := t.GetTracer().(type) {
	case nil:
		return nil, nil, nil
	case *meshapi.Tracing_Zipkin_:
		name, clusterName, field, addr = "envoy.tracers.zipkin", "zipkin", "tracing.zipkin.address", tr.Zipkin.GetAddress()
		cfg = map[string]any{
			"@type": typeZipkin, "collector_cluster": clusterName, "collector_endpoint": "/api/v2/spans",
			"collector_endpoint_version": "HTTP_JSON", "trace_id_128bit": true, "shared_span_context": false,
		}
	case *meshapi.Tracing_Lightstep_:
		name, clusterName, field, addr = "envoy.tracers.lightstep", "lightstep", "tracing.lightstep.address", tr.Lightstep.GetAddress()
		cfg = map[string]any{"@type": typeLightstep, "collector_cluster": clusterName, "access_token_file": st.LightstepTokenPath()}
		h2 = true
	case *meshapi.Tracing_Datadog_:
		name, clusterName, field, addr = "envoy.tracers.datadog", "datadog_agent", "tracing.datadog.address", tr.Datadog.GetAddress()
		cfg = map[string]any{"@type": typeDatadog, "collector_cluster": clusterName, "service_name": st.cluster}
	case *meshapi.Tracing_Stackdriver_:
		// Istio's default template renders nothing for Stackdriver, but start-up needs a GCP project.
		if st.cfg.PlatformMetadata["gcp_project"] == "" {
			return nil, nil, fmt.Errorf("bootstrap: ProxyConfig field tracing.stackdriver: needs GCP project metadata (PlatformMetadata gcp_project), none found")
		}
		return nil, nil, nil
	default:
		st.logger().Warn("tracer not rendered by the default bootstrap", "tracer", fmt.Sprintf("%T", tr))
		return nil, nil, nil
	}
	sa, err := st.hostPort(field, addr)
	if err != nil {
		return nil, nil, err
	}
	c := Cluster{
		Name: clusterName, AltStatName: clusterName + ";", Type: "STRICT_DNS", ConnectTimeout: "1s", LbPolicy: "ROUND_ROBIN",
		RespectDNSTTL: true, DNSLookupFamily: st.dnsFamily,
		LoadAssignment: &ClusterLoadAssign{ClusterName: clusterName, Endpoints: []LocalityEndpoint{{LbEndpoints: []LbEndpoint{{Endpoint: Endpoint{Address: Address{SocketAddress: sa}}}}}}},
	}
	if clusterName == "zipkin" {
		c.DNSRefreshRate = "30s"
	}
	if h2 {
		c.TypedExtensionProtocolOptions = http2Options()
	}
	if tls := t.GetTlsSettings(); tls != nil {
		ts, err := st.tlsTransportSocket(tls, "tracer", "tracing.tlsSettings", h2)
		if err != nil {
			return nil, nil, err
		}
		c.TransportSocket = ts
	}
	return &Tracing{HTTP: TypedExtension{Name: name, TypedConfig: cfg}}, &c, nil
}

// LightstepTokenPath is where the agent writes the Lightstep access token (<configPath>/lightstep_access_token.txt).
func (st *state) LightstepTokenPath() string {
	return st.pc.GetConfigPath() + "/lightstep_access_token.txt"
}

// sdsSecretConfig is an SDS secret reference served by the agent on sds-grpc, as Istio's
// model.ConstructSdsSecretConfig builds it for the tracer and service clusters: the node is sent
// on the first request only.
func sdsSecretConfig(name string) map[string]any {
	c := map[string]any{
		"api_config_source": map[string]any{
			"api_type": "GRPC", "set_node_on_first_message_only": true, "transport_api_version": "V3",
			"grpc_services": []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": "sds-grpc"}}},
		},
		"resource_api_version": "V3",
	}
	// pkg/model/authentication.go (same at every supported tag): only the preset configs of
	// "default" and "ROOTCA" carry InitialFetchTimeout 0s; constructSdsSecretConfig builds the
	// others (file-cert:..., file-root:...) without it.
	if name == "default" || name == "ROOTCA" {
		c["initial_fetch_timeout"] = "0s"
	}
	return map[string]any{"name": name, "sds_config": c}
}

// tlsTransportSocket renders a ClientTLSSettings as an UpstreamTlsContext whose secrets come from
// SDS, as Istio's tlsContextConvert and transportSocketConverter (pkg/bootstrap/option/convert.go):
// SANs matched exactly (match_subject_alt_names, so a DNS or a URI SAN matches), ALPN h2 for
// SIMPLE and MUTUAL and istio,h2 for ISTIO_MUTUAL when the cluster speaks HTTP/2 (h2; none
// otherwise), the SNI given (ISTIO_MUTUAL falls back to defaultSNI), and the node metadata's
// TLS_CLIENT_* paths ahead of the settings' own.
func (st *state) tlsTransportSocket(tls *meshapi.ClientTLSSettings, defaultSNI, field string, h2 bool) (*TypedExtension, error) {
	orDefault := func(meta, own string) string {
		if meta != "" {
			return meta
		}
		return own
	}
	common := map[string]any{}
	validation := func(root string) {
		if root == "" {
			return // Envoy requires the secret config; without a CA nothing is validated
		}
		dvc := map[string]any{}
		if sans := tls.GetSubjectAltNames(); len(sans) > 0 {
			m := make([]any, len(sans))
			for i, s := range sans {
				m[i] = map[string]any{"exact": s}
			}
			dvc["match_subject_alt_names"] = m
		}
		common["combined_validation_context"] = map[string]any{
			"default_validation_context":           dvc,
			"validation_context_sds_secret_config": sdsSecretConfig(root),
		}
	}
	var alpn []any
	sni := tls.GetSni()
	switch tls.GetMode() {
	case meshapi.ClientTLSSettings_DISABLE:
		return nil, nil
	case meshapi.ClientTLSSettings_ISTIO_MUTUAL:
		common["tls_certificate_sds_secret_configs"] = []any{sdsSecretConfig("default")}
		validation("ROOTCA")
		alpn = []any{"istio", "h2"}
		if sni == "" {
			sni = defaultSNI
		}
	case meshapi.ClientTLSSettings_MUTUAL, meshapi.ClientTLSSettings_SIMPLE:
		if tls.GetMode() == meshapi.ClientTLSSettings_MUTUAL {
			cert := orDefault(st.meta.TLSClientCertChain, tls.GetClientCertificate())
			key := orDefault(st.meta.TLSClientKey, tls.GetPrivateKey())
			if cert == "" || key == "" {
				return nil, fmt.Errorf("bootstrap: ProxyConfig field %s: MUTUAL needs clientCertificate and privateKey", field)
			}
			common["tls_certificate_sds_secret_configs"] = []any{sdsSecretConfig("file-cert:" + cert + "~" + key)}
		}
		if ca := orDefault(st.meta.TLSClientRootCert, tls.GetCaCertificates()); ca != "" {
			validation("file-root:" + ca)
		}
		alpn = []any{"h2"}
	default:
		return nil, fmt.Errorf("bootstrap: ProxyConfig field %s.mode: %v not supported", field, tls.GetMode())
	}
	if h2 {
		common["alpn_protocols"] = alpn
	}
	ctx := map[string]any{"@type": typeUpstreamTLS, "common_tls_context": common}
	if sni != "" {
		ctx["sni"] = sni
	}
	return &TypedExtension{Name: "envoy.transport_sockets.tls", TypedConfig: ctx}, nil
}

// remoteServiceCluster is the STRICT_DNS HTTP/2 cluster of a gRPC service ProxyConfig names
// (envoyMetricsService, envoyAccessLogService), with its TLS and TCP keepalive settings.
func (st *state) remoteServiceCluster(name, field string, rs *meshapi.RemoteService) (*Cluster, error) {
	sa, err := st.hostPort(field+".address", rs.GetAddress())
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Name: name, AltStatName: name + ";", Type: "STRICT_DNS", ConnectTimeout: "1s", LbPolicy: "ROUND_ROBIN",
		RespectDNSTTL: true, DNSLookupFamily: st.dnsFamily, TypedExtensionProtocolOptions: http2Options(),
		LoadAssignment: &ClusterLoadAssign{ClusterName: name, Endpoints: []LocalityEndpoint{{LbEndpoints: []LbEndpoint{{Endpoint: Endpoint{Address: Address{SocketAddress: sa}}}}}}},
	}
	if tls := rs.GetTlsSettings(); tls != nil {
		ts, err := st.tlsTransportSocket(tls, name, field+".tlsSettings", true)
		if err != nil {
			return nil, err
		}
		c.TransportSocket = ts
	}
	if ka := rs.GetTcpKeepalive(); ka != nil {
		// Istio's keepaliveConverter: UInt32Value wrappers marshalled by encoding/json, so each
		// is {"value": N}, a form Envoy's JSON parser takes (protobuf's JsonStreamToMessage
		// allows the object form of a wrapper); values of 0 are left out.
		k := map[string]any{}
		for name, v := range map[string]uint32{
			"keepalive_probes": ka.GetProbes(), "keepalive_time": uint32(ka.GetTime().GetSeconds()),
			"keepalive_interval": uint32(ka.GetInterval().GetSeconds()),
		} {
			if v > 0 {
				k[name] = map[string]any{"value": v}
			}
		}
		c.UpstreamConnectionOptions = &UpstreamConnOpts{TCPKeepalive: k}
	}
	return c, nil
}

// statsSinks renders the metrics service and statsd sinks ProxyConfig asks for, and the clusters
// of the metrics and access log services.
func (st *state) statsSinks(ctx context.Context) ([]TypedExtension, []Cluster, error) {
	var sinks []TypedExtension
	var clusters []Cluster
	if ms := st.pc.GetEnvoyMetricsService(); ms.GetAddress() != "" {
		c, err := st.remoteServiceCluster("envoy_metrics_service", "envoyMetricsService", ms)
		if err != nil {
			return nil, nil, err
		}
		clusters = append(clusters, *c)
		sinks = append(sinks, TypedExtension{Name: "envoy.stat_sinks.metrics_service", TypedConfig: map[string]any{
			"@type": typeMetricsService, "transport_api_version": "V3",
			"grpc_service": map[string]any{"envoy_grpc": map[string]any{"cluster_name": "envoy_metrics_service"}},
		}})
	}
	if als := st.pc.GetEnvoyAccessLogService(); als.GetAddress() != "" {
		c, err := st.remoteServiceCluster("envoy_accesslog_service", "envoyAccessLogService", als)
		if err != nil {
			return nil, nil, err
		}
		clusters = append(clusters, *c)
	}
	if a := st.pc.GetStatsdUdpAddress(); a != "" {
		sa, err := st.statsdAddress(ctx)
		if err != nil {
			return nil, nil, err
		}
		if sa == nil {
			return sinks, clusters, nil
		}
		sinks = append(sinks, TypedExtension{Name: "envoy.stat_sinks.statsd", TypedConfig: map[string]any{
			"@type": typeStatsd, "address": map[string]any{"socket_address": sa},
		}})
	}
	return sinks, clusters, nil
}

// statsdAddress is statsdUdpAddress with its host resolved to an IP: Envoy's statsd sink takes
// only an IP. cmd resolves it once at start as Istio's agent does (ResolveStatsdAddress), so an
// address arriving here is normally an IP already. A name that does not resolve is Istio's
// behaviour too: a warning, and no statsd sink (nil, nil); only the caller's context ending is an
// error. The lookup ends with ctx or after Config.ResolveTimeout [15s], whichever is first.
func (st *state) statsdAddress(ctx context.Context) (*SocketAddress, error) {
	sa, err := st.hostPort("statsdUdpAddress", st.pc.GetStatsdUdpAddress())
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(sa.Address); err == nil {
		return sa, nil
	}
	resolved, err := ResolveStatsdAddress(ctx, net.JoinHostPort(sa.Address, strconv.Itoa(int(sa.PortValue))), st.cfg.Resolver, st.cfg.ResolveTimeout)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("bootstrap: ProxyConfig field statsdUdpAddress %q: %w", st.pc.GetStatsdUdpAddress(), ctx.Err())
	}
	if err != nil || !resolved.IsValid() {
		st.logger().Warn("resolve StatsdUdpAddress failed; no statsd sink", "statsdUdpAddress", st.pc.GetStatsdUdpAddress(), "error", err)
		return nil, nil
	}
	return &SocketAddress{Address: resolved.Addr().String(), PortValue: uint32(resolved.Port())}, nil
}

// DefaultStatsdResolveTimeout bounds the statsd host lookup as Istio's ResolveAddr does (15 s,
// pilot/pkg/util/network/ip.go, 1.28.10 .. master).
const DefaultStatsdResolveTimeout = 15 * time.Second

// ResolveStatsdAddress resolves a statsdUdpAddress ("host:port") as Istio's agent does at start
// (pilot/cmd/pilot-agent/config/config.go calling pilot/pkg/util/network ResolveAddr, identical
// 1.28.10 .. master): one lookup of either family bounded by timeout [15s], the first IPv4
// address, else the last address returned. The zero AddrPort with a nil error is a port that
// does not parse, which Istio also turns into no address. On an error Istio's agent logs a
// warning and runs without statsd; the caller does the same.
func ResolveStatsdAddress(ctx context.Context, addr string, r Resolver, timeout time.Duration) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if r == nil {
		r = net.DefaultResolver
	}
	if timeout <= 0 {
		timeout = DefaultStatsdResolveTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ips, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("lookup failed for IP address: %v", err)
	}
	var out netip.AddrPort
	for _, ip := range ips {
		ip = ip.Unmap()
		p, err := strconv.ParseUint(port, 10, 16)
		if !ip.IsValid() || err != nil {
			continue
		}
		out = netip.AddrPortFrom(ip, uint16(p))
		if ip.Is4() {
			break
		}
	}
	return out, nil
}

// WriteLightstepToken writes the Lightstep access token where the rendered bootstrap tells Envoy
// to read it (<configPath>/lightstep_access_token.txt), as Istio's agent does before rendering;
// it does nothing unless the tracer is Lightstep.
func WriteLightstepToken(pc *meshapi.ProxyConfig) error {
	ls, ok := pc.GetTracing().GetTracer().(*meshapi.Tracing_Lightstep_)
	if !ok {
		return nil
	}
	path := pc.GetConfigPath() + "/lightstep_access_token.txt"
	if err := WriteFile(path, []byte(ls.Lightstep.GetAccessToken()), 0o600); err != nil { //nolint:staticcheck // Lightstep is deprecated in Istio's API, still honoured
		return fmt.Errorf("bootstrap: writing the Lightstep access token: %w", err)
	}
	return nil
}
