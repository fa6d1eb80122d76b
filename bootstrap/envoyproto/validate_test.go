package envoyproto

import (
	"strings"
	"testing"
)

// TestWrapperForms: a google.protobuf wrapper (TcpKeepalive's UInt32Values here) validates as its
// bare value and, as Envoy's parser takes it (protobuf's JsonStreamToMessage sets
// allow_legacy_syntax), as an object holding only "value" (the form Istio's keepaliveConverter
// writes for the metrics and access log services); any other object is a finding at its path.
func TestWrapperForms(t *testing.T) {
	doc := func(keepalive string) []byte {
		return []byte(`{"node": {"id": "sidecar~10.0.0.5~a.b~b.svc.cluster.local", "cluster": "a.b"},
 "static_resources": {"clusters": [{"name": "c", "type": "STATIC", "connect_timeout": "1s",
  "upstream_connection_options": {"tcp_keepalive": ` + keepalive + `},
  "load_assignment": {"cluster_name": "c", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 1}}}}]}]}}]}}`)
	}
	for keepalive, want := range map[string]string{
		`{"keepalive_time": 300}`:            "",
		`{"keepalive_time": {"value": 300}}`: "",
		`{"keepalive_time": {"value": 300}, "keepalive_probes": 3, "keepalive_interval": {"value": 5}}`: "",
		`{"keepalive_time": {"value": "x"}}`:           "keepalive_time.value: want a number",
		`{"keepalive_time": {"value": 1, "extra": 2}}`: "keepalive_time: want a google.protobuf.UInt32Value",
		`{"keepalive_time": {"valu": 1}}`:              "keepalive_time: want a google.protobuf.UInt32Value",
		`{"keepalive_time": true}`:                     "keepalive_time: want a number",
	} {
		var got []string
		for _, f := range Validate(doc(keepalive)) {
			got = append(got, f.Path+": "+f.Message)
		}
		if want == "" && len(got) > 0 || want != "" && !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("%s: findings %q, want %q", keepalive, got, want)
		}
	}
}

// FuzzValidate: any bytes (an override file, a rendered template) give findings or none, never a
// panic, and the same findings twice (the wrapper unwrapping edits only Validate's own copy).
func FuzzValidate(f *testing.F) {
	f.Add([]byte(`{"node": {"id": "a", "cluster": "b"}}`))
	f.Add([]byte(`{"static_resources": {"clusters": [{"name": "c", "upstream_connection_options": {"tcp_keepalive": {"keepalive_time": {"value": 1}}}}]}}`))
	f.Add([]byte(`{"overload_manager": {"resource_monitors": [{"name": "m", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig", "max_active_downstream_connections": {"value": 1}}}]}}`))
	f.Add([]byte(`[1, {"value": null}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		first, second := Validate(b), Validate(b)
		if len(first) != len(second) {
			t.Fatalf("findings differ between runs: %v / %v", first, second)
		}
		for i := range first {
			if first[i] != second[i] {
				t.Fatalf("findings differ between runs: %v / %v", first, second)
			}
		}
	})
}
