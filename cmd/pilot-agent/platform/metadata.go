package platform

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
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
	GCPQuotaProject      = "gcp_quota_project"
	GCPZone              = "gcp_zone"
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

// gcpFacts follows Istio's gcpEnv (pkg/bootstrap/platform/gcp.go, identical 1.28.10 .. master).
// Metadata: GCP_METADATA (project|number|cluster|location), when it gives anything, is the whole
// of it, with gcp_quota_project from GCP_QUOTA_PROJECT, gcp_gke_cluster_url and gcp_zone from
// GCP_ZONE (GCPStaticMetadata), and the metadata server is not asked; otherwise the server's
// values, all paths at once (header Metadata-Flavor: Google), gcp_location being the cluster
// location, else the instance's zone. Locality: the zone is GCP_ZONE only together with
// GCP_METADATA, else the one in resolv.conf's search line, else the metadata server's; the region
// is the zone without its last "-" part, and an unexpected zone gives no locality (zoneToRegion).
func gcpFacts(ctx context.Context, c *http.Client, cfg Config) (map[string]string, string) {
	host := cfg.GCEMetadataHost
	if host == "" {
		host = "metadata.google.internal"
	}
	base := "http://" + host + "/computeMetadata/v1/"
	flavor := map[string]string{"Metadata-Flavor": "Google"}
	md := gcpStatic(cfg)
	zone := md[GCPZone]
	if zone == "" {
		zone = zoneFromResolvConf(cfg.resolvConf())
	}
	if len(md) == 0 {
		md = fetchAll(ctx, c, base, map[string]string{
			GCPProject:           "project/project-id",
			GCPProjectNumber:     "project/numeric-project-id",
			GCPCluster:           "instance/attributes/cluster-name",
			GCPLocation:          "instance/attributes/cluster-location",
			GCEInstance:          "instance/name",
			GCEInstanceID:        "instance/id",
			GCEInstanceTemplate:  "instance/attributes/instance-template",
			GCEInstanceCreatedBy: "instance/attributes/created-by",
			"zone":               "instance/zone",
		}, flavor)
		serverZone := lastPathElem(md["zone"])
		delete(md, "zone")
		if md[GCPLocation] == "" {
			md[GCPLocation] = serverZone // Istio's clusterLocationFn: the cluster location, else the zone
		}
		if zone == "" {
			zone = serverZone
		}
		for k, v := range md {
			if v == "" {
				delete(md, k)
			}
		}
		addClusterURL(md)
	} else if zone == "" {
		zone = lastPathElem(get(ctx, c, http.MethodGet, base+"instance/zone", flavor))
	}
	if len(md) == 0 {
		md = nil
	}
	return md, gcpLocality(zone)
}

// gcpStatic is Istio's GCPStaticMetadata: nothing without GCP_METADATA; with it, its four fields
// when it has exactly four, the quota project, the cluster URL and GCP_ZONE as gcp_zone.
func gcpStatic(cfg Config) map[string]string {
	if cfg.GCPMetadata == "" {
		return nil
	}
	md := map[string]string{}
	if parts := strings.Split(cfg.GCPMetadata, "|"); len(parts) == 4 {
		for i, k := range []string{GCPProject, GCPProjectNumber, GCPCluster, GCPLocation} {
			md[k] = parts[i]
		}
	}
	if cfg.GCPQuotaProject != "" {
		md[GCPQuotaProject] = cfg.GCPQuotaProject
	}
	addClusterURL(md)
	if cfg.GCPZone != "" {
		md[GCPZone] = cfg.GCPZone
	}
	return md
}

// addClusterURL adds gcp_gke_cluster_url when the project, location and cluster are all known
// (Istio's constructGKEClusterURL asks only that the keys be present).
func addClusterURL(md map[string]string) {
	p, okP := md[GCPProject]
	l, okL := md[GCPLocation]
	n, okN := md[GCPCluster]
	if okP && okL && okN {
		md[GCPClusterURL] = fmt.Sprintf("https://container.googleapis.com/v1/projects/%s/locations/%s/clusters/%s", p, l, n)
	}
}

// zoneInResolvConf is the zone in a GKE pod's resolv.conf search line
// ("search ns.svc.cluster.local ... us-central1-f.c.my-proj.internal c.my-proj.internal
// google.internal"), as Istio's zoneInResolvRE reads it.
var zoneInResolvConf = regexp.MustCompile(`^search.* ([^-]+-[^-]+-[^-]+)\.c\.[^.]+\.internal`)

// zoneFromResolvConf returns the zone in the file's search line, or "" (unreadable, none).
func zoneFromResolvConf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if m := zoneInResolvConf.FindStringSubmatch(l); len(m) == 2 {
			return m[1]
		}
	}
	return ""
}

// lastPathElem is the metadata server's instance/zone ("projects/<number>/zones/<zone>") reduced
// to the zone, as the metadata client's Zone does.
func lastPathElem(s string) string {
	return s[strings.LastIndexByte(s, '/')+1:]
}

// zoneRegion is Istio's zoneRE: zones are <country>-<region>-<zone>.
var zoneRegion = regexp.MustCompile(`^([^-]+-[^-]+)-[^-]+$`)

// gcpLocality is the region/zone locality of a zone, or "" when the zone is not of that form
// (Istio then leaves the locality empty).
func gcpLocality(zone string) string {
	m := zoneRegion.FindStringSubmatch(zone)
	if len(m) != 2 {
		return ""
	}
	return m[1] + "/" + zone
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
