package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
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
		Name: clusterName, Type: "STRICT_DNS", ConnectTimeout: "1s", LbPolicy: "ROUND_ROBIN",
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
		ts, err := tlsTransportSocket(tls, "tracer", "tracing.tlsSettings")
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

// tlsTransportSocket renders a ClientTLSSettings as an UpstreamTlsContext whose secrets come from SDS.
func tlsTransportSocket(tls *meshapi.ClientTLSSettings, defaultSNI, field string) (*TypedExtension, error) {
	sds := func(name string) map[string]any {
		return map[string]any{"name": name, "sds_config": map[string]any{
			"api_config_source": map[string]any{
				"api_type": "GRPC", "transport_api_version": "V3",
				"grpc_services": []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": "sds-grpc"}}},
			},
			"resource_api_version": "V3",
		}}
	}
	common := map[string]any{}
	switch tls.GetMode() {
	case meshapi.ClientTLSSettings_DISABLE:
		return nil, nil
	case meshapi.ClientTLSSettings_ISTIO_MUTUAL:
		common["tls_certificate_sds_secret_configs"] = []any{sds("default")}
		common["combined_validation_context"] = map[string]any{
			"default_validation_context":           map[string]any{},
			"validation_context_sds_secret_config": sds("ROOTCA"),
		}
	case meshapi.ClientTLSSettings_MUTUAL, meshapi.ClientTLSSettings_SIMPLE:
		if tls.GetMode() == meshapi.ClientTLSSettings_MUTUAL {
			if tls.GetClientCertificate() == "" || tls.GetPrivateKey() == "" {
				return nil, fmt.Errorf("bootstrap: ProxyConfig field %s: MUTUAL needs clientCertificate and privateKey", field)
			}
			common["tls_certificate_sds_secret_configs"] = []any{sds("file-cert:" + tls.GetClientCertificate() + "~" + tls.GetPrivateKey())}
		}
		if ca := tls.GetCaCertificates(); ca != "" {
			common["combined_validation_context"] = map[string]any{
				"default_validation_context":           map[string]any{},
				"validation_context_sds_secret_config": sds("file-root:" + ca),
			}
		}
	default:
		return nil, fmt.Errorf("bootstrap: ProxyConfig field %s.mode: %v not supported", field, tls.GetMode())
	}
	sni := tls.GetSni()
	if sni == "" {
		sni = defaultSNI
	}
	if sans := tls.GetSubjectAltNames(); len(sans) > 0 {
		if cvc, ok := common["combined_validation_context"].(map[string]any); ok {
			var m []any
			for _, s := range sans {
				m = append(m, map[string]any{"san_type": "DNS", "matcher": map[string]any{"exact": strings.TrimSpace(s)}})
			}
			cvc["default_validation_context"] = map[string]any{"match_typed_subject_alt_names": m}
		}
	}
	return &TypedExtension{Name: "envoy.transport_sockets.tls", TypedConfig: map[string]any{
		"@type": typeUpstreamTLS, "common_tls_context": common, "sni": sni,
	}}, nil
}

// remoteServiceCluster is the STRICT_DNS HTTP/2 cluster of a gRPC service ProxyConfig names
// (envoyMetricsService, envoyAccessLogService), with its TLS and TCP keepalive settings.
func (st *state) remoteServiceCluster(name, field string, rs *meshapi.RemoteService) (*Cluster, error) {
	sa, err := st.hostPort(field+".address", rs.GetAddress())
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Name: name, Type: "STRICT_DNS", ConnectTimeout: "1s", LbPolicy: "ROUND_ROBIN",
		RespectDNSTTL: true, DNSLookupFamily: st.dnsFamily, TypedExtensionProtocolOptions: http2Options(),
		LoadAssignment: &ClusterLoadAssign{ClusterName: name, Endpoints: []LocalityEndpoint{{LbEndpoints: []LbEndpoint{{Endpoint: Endpoint{Address: Address{SocketAddress: sa}}}}}}},
	}
	if tls := rs.GetTlsSettings(); tls != nil {
		ts, err := tlsTransportSocket(tls, name, field+".tlsSettings")
		if err != nil {
			return nil, err
		}
		c.TransportSocket = ts
	}
	if ka := rs.GetTcpKeepalive(); ka != nil {
		c.UpstreamConnectionOptions = &UpstreamConnOpts{TCPKeepalive: TCPKeepalive{
			KeepaliveProbes:   ka.GetProbes(),
			KeepaliveTime:     uint32(ka.GetTime().GetSeconds()),
			KeepaliveInterval: uint32(ka.GetInterval().GetSeconds()),
		}}
	}
	return c, nil
}

// statsSinks renders the metrics service and statsd sinks ProxyConfig asks for, and the clusters
// of the metrics and access log services.
func (st *state) statsSinks() ([]TypedExtension, []Cluster, error) {
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
		sa, err := st.statsdAddress()
		if err != nil {
			return nil, nil, err
		}
		sinks = append(sinks, TypedExtension{Name: "envoy.stat_sinks.statsd", TypedConfig: map[string]any{
			"@type": typeStatsd, "address": map[string]any{"socket_address": sa},
		}})
	}
	return sinks, clusters, nil
}

// statsdAddress is statsdUdpAddress with its host resolved to an IP: Envoy's statsd sink takes
// only an IP, and Istio's agent resolves the name at start.
func (st *state) statsdAddress() (*SocketAddress, error) {
	sa, err := st.hostPort("statsdUdpAddress", st.pc.GetStatsdUdpAddress())
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(sa.Address); err == nil {
		return sa, nil
	}
	r := st.cfg.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	timeout := st.cfg.ResolveTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	network := "ip4"
	if st.mode.ipv6First {
		network = "ip"
	}
	ips, err := r.LookupNetIP(ctx, network, sa.Address)
	if err != nil || len(ips) == 0 {
		if err == nil {
			err = errors.New("no addresses")
		}
		return nil, fmt.Errorf("bootstrap: ProxyConfig field statsdUdpAddress %q: cannot resolve host %q: %w", st.pc.GetStatsdUdpAddress(), sa.Address, err)
	}
	return &SocketAddress{Address: ips[0].Unmap().String(), PortValue: sa.PortValue}, nil
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
