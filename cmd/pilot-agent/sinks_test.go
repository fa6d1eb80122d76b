package main

import (
	"encoding/json"
	"testing"
)

// TestStatsSinksFromProxyConfig: statsdUdpAddress and envoyMetricsService become Envoy stats
// sinks, and the metrics service a STRICT_DNS cluster, as in Istio's bootstrap template
// (tools/packaging/common/envoy_bootstrap.json: stats_sinks metrics_service then statsd, the
// envoy_metrics_service cluster).
func TestStatsSinksFromProxyConfig(t *testing.T) {
	p := newPod(t, `{"statsdUdpAddress": "127.0.0.1:8125", "envoyMetricsService": {"address": "ems.istio-system:15000"}}`)
	code, out, stderr := p.run(t, "bootstrap")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var b struct {
		StatsSinks []struct {
			Name        string `json:"name"`
			TypedConfig struct {
				Type        string `json:"@type"`
				GRPCService struct {
					EnvoyGRPC struct {
						ClusterName string `json:"cluster_name"`
					} `json:"envoy_grpc"`
				} `json:"grpc_service"`
				Address struct {
					SocketAddress struct {
						Address   string `json:"address"`
						PortValue int    `json:"port_value"`
					} `json:"socket_address"`
				} `json:"address"`
			} `json:"typed_config"`
		} `json:"stats_sinks"`
		StaticResources struct {
			Clusters []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"clusters"`
		} `json:"static_resources"`
	}
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("%v\n%.500s", err, out)
	}
	if len(b.StatsSinks) != 2 {
		t.Fatalf("stats_sinks %+v", b.StatsSinks)
	}
	ms, sd := b.StatsSinks[0], b.StatsSinks[1]
	if ms.Name != "envoy.stat_sinks.metrics_service" || ms.TypedConfig.GRPCService.EnvoyGRPC.ClusterName != "envoy_metrics_service" {
		t.Errorf("metrics service sink %+v", ms)
	}
	if sd.Name != "envoy.stat_sinks.statsd" || sd.TypedConfig.Type != "type.googleapis.com/envoy.config.metrics.v3.StatsdSink" ||
		sd.TypedConfig.Address.SocketAddress.Address != "127.0.0.1" || sd.TypedConfig.Address.SocketAddress.PortValue != 8125 {
		t.Errorf("statsd sink %+v", sd)
	}
	found := false
	for _, c := range b.StaticResources.Clusters {
		found = found || (c.Name == "envoy_metrics_service" && c.Type == "STRICT_DNS")
	}
	if !found {
		t.Errorf("no STRICT_DNS envoy_metrics_service cluster in %+v", b.StaticResources.Clusters)
	}
}
