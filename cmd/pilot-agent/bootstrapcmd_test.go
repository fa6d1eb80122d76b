package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var semver = regexp.MustCompile(`^\d+\.\d+\.\d+`)

// TestBootstrapNodeTypesAndVersion: every node type reaches the node id; a waypoint gets Delta
// xDS; the node metadata carries the Istio version followed (never "unknown").
func TestBootstrapNodeTypesAndVersion(t *testing.T) {
	p := newPod(t, "")
	// Istio's application node types: IsApplicationNodeType in pkg/model/proxy.go at 1.30.3.
	for _, nt := range []string{"sidecar", "router", "waypoint", "ztunnel", "agentgateway"} {
		code, out, stderr := p.run(t, "bootstrap", nt, "--domain", "default.svc.cluster.local")
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", nt, code, stderr)
		}
		var b struct {
			Node struct {
				ID       string         `json:"id"`
				Metadata map[string]any `json:"metadata"`
			} `json:"node"`
			Dynamic struct {
				Ads struct {
					APIType string `json:"api_type"`
				} `json:"ads_config"`
			} `json:"dynamic_resources"`
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("%s: %v", nt, err)
		}
		if !strings.HasPrefix(b.Node.ID, nt+"~10.0.0.5~") {
			t.Errorf("%s: node id %s", nt, b.Node.ID)
		}
		if v, _ := b.Node.Metadata["ISTIO_VERSION"].(string); !semver.MatchString(v) {
			t.Errorf("%s: ISTIO_VERSION %q", nt, v)
		}
		if nt == "waypoint" && b.Dynamic.Ads.APIType != "DELTA_GRPC" {
			t.Errorf("waypoint api_type %s", b.Dynamic.Ads.APIType)
		}
	}
	code, out, _ := p.run(t, "version", "--short")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !semver.MatchString(lines[0]) || !strings.HasPrefix(lines[1], "wingman ") {
		t.Errorf("version --short: exit %d %q", code, out)
	}
	if code, out, _ := p.run(t, "version", "-o", "json"); code != 0 || !strings.Contains(out, `"wingmanVersion"`) {
		t.Errorf("version -o json: exit %d %q", code, out)
	}
}

// TestBootstrapTemplateErrors: a custom template (ISTIO_BOOTSTRAP) whose output is not JSON makes
// `pilot-agent bootstrap` fail naming it; one that reads a parameter the stamped Istio release
// does not pass renders it as text/template's missing key (Istio's agent runs text/template with
// default options, pkg/bootstrap/instance.go at every supported tag), and --validate lists it.
func TestBootstrapTemplateErrors(t *testing.T) {
	p := newPod(t, "")
	tmpl := filepath.Join(p.dir, "tmpl.json")
	p.env = append(p.env, "ISTIO_BOOTSTRAP="+tmpl)
	write := func(src string) {
		if err := os.WriteFile(tmpl, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"node": {"id": "{{ .nodeID }}"}, "x": {{ .zipkin }}}`)
	if code, out, stderr := p.run(t, "bootstrap"); code == 0 || !strings.Contains(stderr, "not JSON") || out != "" {
		t.Errorf("not JSON: exit %d, stderr %q, out %q", code, stderr, out)
	}
	write(`{"node": {"id": "{{ .no_such_param }}"}}`)
	if code, out, stderr := p.run(t, "bootstrap"); code != 0 || !strings.Contains(out, `"<no value>"`) {
		t.Errorf("unknown parameter: exit %d, stderr %q, out %q", code, stderr, out)
	}
	if _, _, stderr := p.run(t, "bootstrap", "--validate"); !strings.Contains(stderr, `template parameter "no_such_param"`) || strings.Count(stderr, "warning:") != 1 {
		t.Errorf("--validate does not list the unknown parameter once: %q", stderr)
	}
	// Self discovery renders local_cluster, so --validate passes.
	p.env = append(p.env[:len(p.env)-1], "ISTIO_META_ENABLE_SELF_DISCOVERY=true")
	if code, _, stderr := p.run(t, "bootstrap", "--validate"); code != 0 {
		t.Errorf("self discovery: exit %d, stderr %q", code, stderr)
	}
}

// TestBootstrapPlatformMetadata: on GCP (CLOUD_PLATFORM=gcp, the metadata server a local stand-in
// at GCE_METADATA_HOST), the bootstrap carries PLATFORM_METADATA and the platform's locality.
func TestBootstrapPlatformMetadata(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "no flavor", http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/computeMetadata/v1/project/project-id":
			w.Write([]byte("proj-1"))
		case "/computeMetadata/v1/instance/zone":
			w.Write([]byte("projects/1/zones/europe-west4-b"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p := newPod(t, "", "CLOUD_PLATFORM=gcp", "GCE_METADATA_HOST="+strings.TrimPrefix(srv.URL, "http://"))
	code, out, stderr := p.run(t, "bootstrap")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var b struct {
		Node struct {
			Locality map[string]string `json:"locality"`
			Metadata struct {
				Platform map[string]string `json:"PLATFORM_METADATA"`
			} `json:"metadata"`
		} `json:"node"`
	}
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	if b.Node.Metadata.Platform["gcp_project"] != "proj-1" || b.Node.Metadata.Platform["gcp_location"] != "europe-west4-b" ||
		b.Node.Locality["region"] != "europe-west4" || b.Node.Locality["zone"] != "europe-west4-b" {
		t.Errorf("node %+v", b.Node)
	}
}

// TestBootstrapProxyConfigTemplate: ProxyConfig proxyBootstrapTemplatePath is rendered.
func TestBootstrapProxyConfigTemplate(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "pc.tmpl.json")
	if err := os.WriteFile(tmpl, []byte(`{"node": {"id": "{{ .nodeID }}", "cluster": "from-proxyconfig-template"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pc := fmt.Sprintf(`{"binaryPath": %q, "proxyAdminPort": %d, "statusPort": %d, "discoveryAddress": "127.0.0.1:1", "proxyBootstrapTemplatePath": %q}`,
		standinBin, freePort(t), freePort(t), tmpl)
	p := newPod(t, pc)
	code, out, stderr := p.run(t, "bootstrap")
	if code != 0 || !strings.Contains(out, "from-proxyconfig-template") {
		t.Errorf("exit %d, stderr %q, out %.200s", code, stderr, out)
	}
}

// TestBootstrapCredentialKey: a credential fetcher listening on
// ./var/run/secrets/credential-uds/socket sets the node metadata key credential: "true".
func TestBootstrapCredentialKey(t *testing.T) {
	p := newPod(t, "")
	credential := func() any {
		t.Helper()
		return bootstrapMetadata(t, p)["credential"]
	}
	if v := credential(); v != nil {
		t.Errorf("no socket: credential = %v", v)
	}
	sock := filepath.Join(p.dir, "var/run/secrets/credential-uds/socket")
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if v := credential(); v != "true" {
		t.Errorf("listening socket: credential = %v", v)
	}
}

// TestProxyTypesOneList: `help proxy`, `bootstrap --help` and the bad-type error name the same
// node types, each of which the agent accepts: Istio's application node types
// (pkg/model/proxy.go, IsApplicationNodeType: sidecar, router, waypoint, ztunnel, agentgateway).
// help proxy said [sidecar|router|waypoint] while the error listed all five.
func TestProxyTypesOneList(t *testing.T) {
	want := "sidecar|router|waypoint|ztunnel|agentgateway"
	p := newPod(t, "")
	usage := regexp.MustCompile(`pilot-agent (proxy|bootstrap) \[([a-z|]+)\]`)
	for _, args := range [][]string{{"help", "proxy"}, {"proxy", "--help"}, {"bootstrap", "--help"}} {
		code, out, _ := p.run(t, args...)
		m := usage.FindStringSubmatch(out)
		if code != 0 || m == nil || m[2] != want {
			t.Errorf("%v: exit %d, usage line %q; want [%s]", args, code, m, want)
		}
	}
	code, _, stderr := p.run(t, "proxy", "gateway")
	if code != exitUsage || !strings.Contains(stderr, "want one of "+strings.ReplaceAll(want, "|", ", ")) {
		t.Errorf("proxy gateway: exit %d, stderr %q", code, stderr)
	}
	for nt := range strings.SplitSeq(want, "|") {
		if code, _, stderr := p.run(t, "bootstrap", nt); code != 0 {
			t.Errorf("bootstrap %s: exit %d, stderr %q", nt, code, stderr)
		}
	}
}

// bootstrapMetadata runs `pilot-agent bootstrap` in p and returns the node metadata it prints.
func bootstrapMetadata(t *testing.T, p *pod) map[string]any {
	t.Helper()
	code, out, stderr := p.run(t, "bootstrap")
	if code != 0 {
		t.Fatalf("bootstrap: exit %d, stderr %q", code, stderr)
	}
	var b struct {
		Node struct {
			Metadata map[string]any `json:"metadata"`
		} `json:"node"`
	}
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	return b.Node.Metadata
}
