package platform

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// gceStandIn answers like the GCE metadata server: only with the Metadata-Flavor header.
func gceStandIn(t *testing.T, values map[string]string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "missing flavor", http.StatusForbidden)
			return
		}
		v, ok := values[strings.TrimPrefix(r.URL.Path, "/computeMetadata/v1/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(v))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestGCPMetadata(t *testing.T) {
	srv := gceStandIn(t, map[string]string{
		"project/project-id":                   "my-proj",
		"project/numeric-project-id":           "1234",
		"instance/attributes/cluster-name":     "c1",
		"instance/attributes/cluster-location": "us-central1",
		"instance/name":                        "gke-node-1",
		"instance/id":                          "987",
		"instance/zone":                        "projects/1234/zones/us-central1-a",
	})
	d := Start(t.Context(), Config{CloudPlatform: "gcp", GCEMetadataHost: strings.TrimPrefix(srv.URL, "http://"), ResolvConf: "absent", MetadataTimeout: 5 * time.Second})
	defer d.Close()
	f := d.Facts(t.Context())
	want := map[string]string{
		GCPProject: "my-proj", GCPProjectNumber: "1234", GCPCluster: "c1", GCPLocation: "us-central1",
		GCEInstance: "gke-node-1", GCEInstanceID: "987",
		GCPClusterURL: "https://container.googleapis.com/v1/projects/my-proj/locations/us-central1/clusters/c1",
	}
	if f.Name != GCP || f.Locality != "us-central1/us-central1-a" || len(f.Metadata) != len(want) {
		t.Fatalf("facts %+v", f)
	}
	for k, v := range want {
		if f.Metadata[k] != v {
			t.Errorf("%s = %q, want %q", k, f.Metadata[k], v)
		}
	}

	// GCP_ZONE alone is not read (Istio reads it only with GCP_METADATA): the server's zone stays.
	d3 := Start(t.Context(), Config{CloudPlatform: "gcp", GCEMetadataHost: strings.TrimPrefix(srv.URL, "http://"),
		GCPZone: "asia-east1-c", ResolvConf: "absent", MetadataTimeout: 5 * time.Second})
	defer d3.Close()
	if f := d3.Facts(t.Context()); f.Locality != "us-central1/us-central1-a" || f.Metadata[GCPZone] != "" {
		t.Errorf("GCP_ZONE without GCP_METADATA: %+v", f)
	}
}

// TestGCPStaticMetadataAsIstio: the expected values are Istio's GCPStaticMetadata and gcpEnv
// (pkg/bootstrap/platform/gcp.go, identical 1.28.10 .. master): with GCP_METADATA the metadata is
// its four fields, gcp_quota_project, the cluster URL and gcp_zone from GCP_ZONE, and nothing from
// the server, which is not asked for metadata; the locality's zone is GCP_ZONE. The values seen side
// by side with Istio's agent at 1.30.3 and master are in bootstrap/SIDE_BY_SIDE.md.
func TestGCPStaticMetadataAsIstio(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("from-server"))
	}))
	defer srv.Close()
	cfg := Config{GCEMetadataHost: strings.TrimPrefix(srv.URL, "http://"), ResolvConf: "absent",
		GCPMetadata: "my-project|123456789|prod-cluster|us-central1-c", GCPQuotaProject: "quota-proj", GCPZone: "us-central1-f"}
	d := Start(t.Context(), cfg) // no CLOUD_PLATFORM: static GCP metadata means GCP (Istio's IsGCP)
	defer d.Close()
	f := d.Facts(t.Context())
	want := map[string]string{
		GCPProject: "my-project", GCPProjectNumber: "123456789", GCPCluster: "prod-cluster", GCPLocation: "us-central1-c",
		GCPQuotaProject: "quota-proj", GCPZone: "us-central1-f",
		GCPClusterURL: "https://container.googleapis.com/v1/projects/my-project/locations/us-central1-c/clusters/prod-cluster",
	}
	if f.Name != GCP || f.Locality != "us-central1/us-central1-f" || len(f.Metadata) != len(want) || hits.Load() != 0 {
		t.Fatalf("facts %+v, %d server requests", f, hits.Load())
	}
	for k, v := range want {
		if f.Metadata[k] != v {
			t.Errorf("%s = %q, want %q", k, f.Metadata[k], v)
		}
	}
	// GCP_METADATA without four fields: only what else it gives (here gcp_zone), still no server
	// metadata.
	cfg.GCPMetadata, cfg.GCPQuotaProject = "just-a-project", ""
	d2 := Start(t.Context(), cfg)
	defer d2.Close()
	if f := d2.Facts(t.Context()); len(f.Metadata) != 1 || f.Metadata[GCPZone] != "us-central1-f" || f.Locality != "us-central1/us-central1-f" {
		t.Errorf("three fields: %+v", f)
	}
}

// TestGCPZoneAsIstio: Istio's getPodZone and zoneToRegion (gcp.go, identical 1.28.10 .. master):
// the zone is GCP_ZONE with GCP_METADATA, else the one in resolv.conf's search line, else the
// metadata server's; the region is ^([^-]+-[^-]+)-[^-]+$ of the zone, and any other zone gives
// no locality.
func TestGCPZoneAsIstio(t *testing.T) {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 10.0.0.10\nsearch ns.svc.cluster.local svc.cluster.local cluster.local us-west1-b.c.test-proj.internal c.test-proj.internal google.internal\noptions ndots:5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := gceStandIn(t, map[string]string{"instance/zone": "projects/1/zones/europe-west4-a"})
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"resolv.conf before the server", Config{ResolvConf: resolv}, "us-west1/us-west1-b"},
		{"GCP_ZONE alone ignored", Config{ResolvConf: resolv, GCPZone: "asia-east1-c"}, "us-west1/us-west1-b"},
		{"GCP_ZONE with GCP_METADATA first", Config{ResolvConf: resolv, GCPZone: "asia-east1-c", GCPMetadata: "p|1|c|l"}, "asia-east1/asia-east1-c"},
		{"the server's when resolv.conf has none", Config{ResolvConf: "absent"}, "europe-west4/europe-west4-a"},
		{"the server's with GCP_METADATA and no GCP_ZONE", Config{ResolvConf: "absent", GCPMetadata: "p|1|c|l"}, "europe-west4/europe-west4-a"},
		{"a zone of another form: none", Config{ResolvConf: "absent", GCPMetadata: "p|1|c|l", GCPZone: "us-central1-f-extra"}, ""},
	} {
		tc.cfg.CloudPlatform, tc.cfg.GCEMetadataHost, tc.cfg.MetadataTimeout = "gcp", host, 5*time.Second
		d := Start(t.Context(), tc.cfg)
		if f := d.Facts(t.Context()); f.Locality != tc.want {
			t.Errorf("%s: locality %q, want %q", tc.name, f.Locality, tc.want)
		}
		d.Close()
	}
}

func TestAWSMetadataIMDSv2(t *testing.T) {
	var tokens atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/latest/api/token" {
			if r.Method != http.MethodPut || r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
				http.Error(w, "bad token request", http.StatusBadRequest)
				return
			}
			tokens.Add(1)
			w.Write([]byte("tok"))
			return
		}
		if r.Header.Get("X-aws-ec2-metadata-token") != "tok" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/latest/meta-data/placement/region":
			w.Write([]byte("eu-west-1"))
		case "/latest/meta-data/placement/availability-zone":
			w.Write([]byte("eu-west-1b"))
		case "/latest/meta-data/instance-id":
			w.Write([]byte("i-0abc"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	d := Start(t.Context(), Config{CloudPlatform: "aws", AWSMetadataURL: srv.URL, MetadataTimeout: 5 * time.Second})
	defer d.Close()
	f := d.Facts(t.Context())
	if f.Locality != "eu-west-1/eu-west-1b" || f.Metadata[AWSInstanceID] != "i-0abc" || f.Metadata[AWSRegion] != "eu-west-1" || tokens.Load() != 1 {
		t.Errorf("facts %+v, tokens %d", f, tokens.Load())
	}
}

// TestMetadataBounded: a metadata server that accepts and never answers costs at most
// MetadataTimeout, and the facts still name the platform.
func TestMetadataBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn // accepted, never answered
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		ln.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	}()
	start := time.Now()
	d := Start(t.Context(), Config{CloudPlatform: "aws", AWSMetadataURL: "http://" + ln.Addr().String(), MetadataTimeout: 200 * time.Millisecond})
	f := d.Facts(t.Context())
	d.Close()
	if f.Name != AWS || f.Metadata != nil {
		t.Errorf("facts %+v", f)
	}
	// The server never answers: only the bound ends the requests. 20 s bounds the wait, not
	// the 200 ms (a loaded machine may be slow, not 100 times slower).
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("took %v with a 200ms bound", el)
	}
}

// TestNoRequestOffCloud: CLOUD_PLATFORM=none, or an undetected platform, makes no request.
func TestNoRequestOffCloud(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, cfg := range []Config{
		{CloudPlatform: "none", GCEMetadataHost: host, AWSMetadataURL: srv.URL},
		{DMIDir: dmi(t, map[string]string{"product_name": "PowerEdge"}), Timeout: 5 * time.Second, GCEMetadataHost: host, AWSMetadataURL: srv.URL},
	} {
		d := Start(t.Context(), cfg)
		if f := d.Facts(t.Context()); f.Name != None || f.Metadata != nil {
			t.Errorf("facts %+v", f)
		}
		d.Close()
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests off cloud", hits.Load())
	}
}

// FuzzGCPZone: whatever the metadata server says, the zone has no '/' and the locality is
// <region>/<zone> with the region a prefix of the zone, or empty.
func FuzzGCPZone(f *testing.F) {
	for _, s := range []string{"projects/1/zones/us-central1-a", "us-east1-b", "", "/", "-", "a/b-", "projects//zones/-x", "a-b-c-d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		zone := lastPathElem(raw)
		loc := gcpLocality(zone)
		if strings.Contains(zone, "/") {
			t.Fatalf("zone %q has a '/'", zone)
		}
		if loc != "" {
			region, z, ok := strings.Cut(loc, "/")
			if !ok || z != zone || !strings.HasPrefix(zone, region+"-") || region == "" || strings.Count(zone, "-") != 2 {
				t.Fatalf("locality %q for zone %q", loc, zone)
			}
		}
	})
}
