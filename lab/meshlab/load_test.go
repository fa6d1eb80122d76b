package meshlab

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	meshv1 "istio.io/api/mesh/v1alpha1"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/internal/ndspb"
)

const goodClusters = `# two clusters, by kind and by @type
kind: Cluster
name: outbound|80||a.demo.svc.cluster.local
connect_timeout: 1s
type: EDS
eds_cluster_config: {eds_config: {ads: {}}}
---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: b
connectTimeout: 2s
---
# an empty document is skipped
`

const goodListener = `kind: Listener
name: echo:7070
api_listener:
  api_listener:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: echo
    rds: {route_config_name: echo, config_source: {ads: {}}}
    http_filters:
    - name: router
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`

const goodNames = `{"kind": "NameTable", "table": {"a.demo.svc.cluster.local": {"ips": ["10.1.0.1"], "registry": "Kubernetes"}}}`

func TestParseFileGood(t *testing.T) {
	res, err := ParseFile("c.yaml", []byte(goodClusters))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("got %d resources, want 2", len(res))
	}
	c0 := res[0].Msg.(*cluster.Cluster)
	if res[0].Name != "outbound|80||a.demo.svc.cluster.local" || c0.GetType() != cluster.Cluster_EDS || c0.GetConnectTimeout().AsDuration().Seconds() != 1 {
		t.Errorf("first cluster decoded wrong: %v", c0)
	}
	if res[1].Name != "b" || res[1].Doc != 2 || res[1].TypeURL != fastpath.ClusterType {
		t.Errorf("second cluster: %+v", res[1])
	}
	l, err := ParseFile("l.yaml", []byte(goodListener))
	if err != nil {
		t.Fatal(err)
	}
	if l[0].Msg.(*listener.Listener).GetApiListener().GetApiListener().GetTypeUrl() == "" {
		t.Errorf("api_listener Any not decoded")
	}
	n, err := ParseFile("n.json", []byte(goodNames))
	if err != nil {
		t.Fatal(err)
	}
	if n[0].Name != "" || n[0].Msg.(*ndspb.NameTable).GetTable()["a.demo.svc.cluster.local"].GetIps()[0] != "10.1.0.1" {
		t.Errorf("name table: %+v", n[0])
	}
	pc, err := ParseFile("pc.yaml", []byte("kind: ProxyConfig\nconcurrency: 2\nproxyMetadata: {FOO: bar}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m := pc[0].Msg.(*meshv1.ProxyConfig); pc[0].TypeURL != fastpath.ProxyConfigType || m.GetConcurrency().GetValue() != 2 || m.GetProxyMetadata()["FOO"] != "bar" {
		t.Errorf("proxy config: %+v", pc[0])
	}
}

func TestParseFileBad(t *testing.T) {
	for _, tc := range []struct {
		name, doc   string
		field, text string // text: a substring of the message, for the reader
		doc2        int
	}{
		{"unknown kind", "kind: Clusterr\nname: a\n", "", "Clusterr", 1},
		{"no kind", "name: a\n", "", "kind", 1},
		{"both", "kind: Cluster\n\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: a\n", "", "both", 1},
		{"unknown top field", "kind: Cluster\nname: a\nconnect_timeot: 1s\n", "connect_timeot", "unknown field", 1},
		{"bad duration", "kind: Cluster\nname: a\nconnect_timeout: soon\n", "connect_timeout", "", 1},
		{"missing name", "kind: Cluster\nconnect_timeout: 1s\n", "name", "needs a name", 1},
		{"deep field", "kind: Cluster\nname: a\n---\nkind: ClusterLoadAssignment\ncluster_name: a\nendpoints:\n- lb_endpoints:\n  - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 80}}}\n  - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: eighty}}}\n",
			"endpoints[0].lb_endpoints[1].endpoint.address.socket_address.port_value", "", 2},
		{"inside Any", goodListener + "    codec_type: HTTP9\n", "api_listener.api_listener.codec_type", "", 1},
		{"unknown @type in Any", "kind: Listener\nname: l\napi_listener: {api_listener: {\"@type\": type.googleapis.com/no.Such}}\n", "api_listener.api_listener.@type", "no.Such", 1},
		{"map value", "kind: NameTable\ntable: {a.b: {ips: [1.2.3.4]}, c.d: {ipz: [1]}}\n", "table[c.d].ipz", "unknown field", 1},
		{"not yaml", "kind: Cluster\n  name: [\n", "", "YAML", 1},
		{"not a mapping", "- a\n- b\n", "", "mapping", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile("bad.yaml", []byte(tc.doc))
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FileError", err)
			}
			if fe.File != "bad.yaml" || fe.Field != tc.field || fe.Doc != tc.doc2 {
				t.Errorf("got file %q doc %d field %q, want bad.yaml doc %d field %q (%v)", fe.File, fe.Doc, fe.Field, tc.doc2, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "bad.yaml") {
				t.Errorf("message %q should name the file and say %q", err, tc.text)
			}
		})
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "clusters.yaml", goodClusters)
	write(t, dir, "listener.yml", goodListener)
	write(t, dir, "names.json", goodNames)
	write(t, dir, ".clusters.yaml.swp", "garbage")
	write(t, dir, "README.md", "not a resource")
	set, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := set.Counts(), "Listener=1 Cluster=2 NameTable=1"; got != want {
		t.Errorf("counts %q, want %q", got, want)
	}
	if set.Files() != 3 {
		t.Errorf("files %d, want 3", set.Files())
	}

	write(t, dir, "dup.yaml", "kind: Cluster\nname: b\n")
	_, err = LoadDir(dir)
	var fe *FileError
	if !errors.As(err, &fe) || fe.File != filepath.Join(dir, "dup.yaml") || !strings.Contains(err.Error(), "clusters.yaml document 2") {
		t.Errorf("duplicate: got %v, want an error naming dup.yaml and clusters.yaml document 2", err)
	}
}

func TestSplitDocsLines(t *testing.T) {
	docs := splitDocs([]byte("a: 1\n---\nb: 2\nc: 3\n--- \nd: 4"))
	if len(docs) != 3 || docs[1].line != 3 || docs[2].line != 6 || string(docs[2].data) != "d: 4" {
		t.Fatalf("got %+v", docs)
	}
}

func write(t testing.TB, dir, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
