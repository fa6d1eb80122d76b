package platform

import (
	"net"
	"net/http"
	"net/http/httptest"
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
	d := Start(t.Context(), Config{CloudPlatform: "gcp", GCEMetadataHost: strings.TrimPrefix(srv.URL, "http://"), MetadataTimeout: 5 * time.Second})
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

	// GCP_METADATA wins for its four keys.
	d2 := Start(t.Context(), Config{CloudPlatform: "gcp", GCEMetadataHost: strings.TrimPrefix(srv.URL, "http://"), GCPMetadata: "env-proj|42|envc|europe-west1"})
	defer d2.Close()
	if m := d2.Facts(t.Context()).Metadata; m[GCPProject] != "env-proj" || m[GCPLocation] != "europe-west1" || m[GCEInstanceID] != "987" {
		t.Errorf("GCP_METADATA: %v", m)
	}

	// GCP_ZONE wins for the zone and the locality.
	d3 := Start(t.Context(), Config{CloudPlatform: "gcp", GCEMetadataHost: strings.TrimPrefix(srv.URL, "http://"), GCPZone: "asia-east1-c"})
	defer d3.Close()
	if f := d3.Facts(t.Context()); f.Locality != "asia-east1/asia-east1-c" {
		t.Errorf("GCP_ZONE: %+v", f)
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
	for _, s := range []string{"projects/1/zones/us-central1-a", "us-east1-b", "", "/", "-", "a/b-", "projects//zones/-x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		zone, loc := gcpZone(raw)
		if strings.Contains(zone, "/") {
			t.Fatalf("zone %q has a '/'", zone)
		}
		if loc != "" {
			region, z, ok := strings.Cut(loc, "/")
			if !ok || z != zone || !strings.HasPrefix(zone, region+"-") || region == "" {
				t.Fatalf("locality %q for zone %q", loc, zone)
			}
		}
	})
}
