package platform

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Facts are what the platform says about this node, under Istio's PLATFORM_METADATA keys
// (pkg/bootstrap/platform gcp.go and aws.go).
type Facts struct {
	Name     string
	Metadata map[string]string // nil when none
	Locality string            // region/zone, "" when unknown
}

// Istio's PLATFORM_METADATA keys.
const (
	GCPProject           = "gcp_project"
	GCPProjectNumber     = "gcp_project_number"
	GCPCluster           = "gcp_gke_cluster_name"
	GCPClusterURL        = "gcp_gke_cluster_url"
	GCPLocation          = "gcp_location"
	GCEInstance          = "gcp_gce_instance"
	GCEInstanceID        = "gcp_gce_instance_id"
	GCEInstanceTemplate  = "gcp_gce_instance_template"
	GCEInstanceCreatedBy = "gcp_gce_instance_created_by"
	AWSRegion            = "aws_region"
	AWSAvailabilityZone  = "aws_availability_zone"
	AWSInstanceID        = "aws_instance_id"
)

const maxMetadataValue = 4 << 10 // a metadata value longer than this is not one we asked for

func fetchFacts(ctx context.Context, cfg Config, name string) Facts {
	f := Facts{Name: name}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Transport: &http.Transport{Proxy: nil}} // the metadata server is link-local
		defer client.CloseIdleConnections()
	}
	switch name {
	case GCP:
		f.Metadata, f.Locality = gcpFacts(ctx, client, cfg)
	case AWS:
		f.Metadata, f.Locality = awsFacts(ctx, client, cfg)
	}
	return f
}

// get returns the body of a 200 answer, trimmed, or "".
func get(ctx context.Context, c *http.Client, method, url string, header map[string]string) string {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return ""
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataValue+1))
	if err != nil || resp.StatusCode != http.StatusOK || len(b) > maxMetadataValue {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// gcpFacts reads the GCE metadata server (header Metadata-Flavor: Google), all paths at once.
// GCP_METADATA (project|number|cluster|location) wins over the server for its four keys.
func gcpFacts(ctx context.Context, c *http.Client, cfg Config) (map[string]string, string) {
	host := cfg.GCEMetadataHost
	if host == "" {
		host = "metadata.google.internal"
	}
	base := "http://" + host + "/computeMetadata/v1/"
	paths := map[string]string{
		GCPProject:           "project/project-id",
		GCPProjectNumber:     "project/numeric-project-id",
		GCPCluster:           "instance/attributes/cluster-name",
		GCPLocation:          "instance/attributes/cluster-location",
		GCEInstance:          "instance/name",
		GCEInstanceID:        "instance/id",
		GCEInstanceTemplate:  "instance/attributes/instance-template",
		GCEInstanceCreatedBy: "instance/attributes/created-by",
		"zone":               "instance/zone",
	}
	got := fetchAll(ctx, c, base, paths, map[string]string{"Metadata-Flavor": "Google"})
	rawZone := got["zone"]
	if cfg.GCPZone != "" {
		rawZone = cfg.GCPZone
	}
	zone, locality := gcpZone(rawZone)
	delete(got, "zone")
	if got[GCPLocation] == "" && zone != "" {
		got[GCPLocation] = zone // Istio: the cluster location, else the instance's zone
	}
	if parts := strings.Split(cfg.GCPMetadata, "|"); len(parts) == 4 {
		for i, k := range []string{GCPProject, GCPProjectNumber, GCPCluster, GCPLocation} {
			if parts[i] != "" {
				got[k] = parts[i]
			}
		}
	}
	for k, v := range got {
		if v == "" {
			delete(got, k)
		}
	}
	if got[GCPProject] != "" && got[GCPLocation] != "" && got[GCPCluster] != "" {
		got[GCPClusterURL] = fmt.Sprintf("https://container.googleapis.com/v1/projects/%s/locations/%s/clusters/%s",
			got[GCPProject], got[GCPLocation], got[GCPCluster])
	}
	if len(got) == 0 {
		got = nil
	}
	return got, locality
}

// gcpZone reads the metadata server's instance/zone ("projects/<number>/zones/<zone>") into the
// zone and the region/zone locality (zones are <region>-<suffix>).
func gcpZone(raw string) (zone, locality string) {
	zone = raw
	if i := strings.LastIndexByte(zone, '/'); i >= 0 {
		zone = zone[i+1:]
	}
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		locality = zone[:i] + "/" + zone
	}
	return zone, locality
}

// awsFacts reads the EC2 instance metadata service: an IMDSv2 session token first (PUT
// /latest/api/token), then plain IMDSv1 reads if the token is refused.
func awsFacts(ctx context.Context, c *http.Client, cfg Config) (map[string]string, string) {
	base := strings.TrimSuffix(cfg.AWSMetadataURL, "/")
	if base == "" {
		base = "http://169.254.169.254"
	}
	header := map[string]string{}
	if tok := get(ctx, c, http.MethodPut, base+"/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"}); tok != "" {
		header["X-aws-ec2-metadata-token"] = tok
	}
	got := fetchAll(ctx, c, base+"/latest/meta-data/", map[string]string{
		AWSRegion:           "placement/region",
		AWSAvailabilityZone: "placement/availability-zone",
		AWSInstanceID:       "instance-id",
	}, header)
	for k, v := range got {
		if v == "" {
			delete(got, k)
		}
	}
	locality := ""
	if got[AWSRegion] != "" {
		locality = got[AWSRegion] + "/" + got[AWSAvailabilityZone]
	}
	if len(got) == 0 {
		got = nil
	}
	return got, strings.TrimSuffix(locality, "/")
}

// fetchAll GETs every path concurrently and waits for all of them (each ends with ctx).
func fetchAll(ctx context.Context, c *http.Client, base string, paths, header map[string]string) map[string]string {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := make(map[string]string, len(paths))
	for k, p := range paths {
		wg.Go(func() {
			v := get(ctx, c, http.MethodGet, base+p, header)
			mu.Lock()
			out[k] = v
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
