// Package platform detects the cloud the agent runs on without putting a probe on the start-up
// path: CLOUD_PLATFORM decides at once when set ("none" skips detection), otherwise detection runs
// in the background, reads only local SMBIOS files (no metadata-server round trip),
// and is bounded by Config.Timeout. On GCP and AWS it then reads the node's metadata from the
// cloud's metadata server (metadata.go), still in the background and bounded by
// Config.MetadataTimeout; on any other machine no request is made. Istio's agent probes metadata
// servers synchronously at start, which has cost 5-90 s (istio/istio#19868, #37832, #39950).
package platform

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Names of the platforms.
const (
	None  = "none"
	AWS   = "aws"
	Azure = "azure"
	GCP   = "gcp"
)

// Config for Start. Immutable.
type Config struct {
	// CloudPlatform is CLOUD_PLATFORM: "" detects, anything else is taken as is.
	CloudPlatform string
	// DMIDir holds the SMBIOS files [/sys/class/dmi/id].
	DMIDir string
	// Timeout bounds detection [100ms].
	Timeout time.Duration

	// Metadata servers (metadata.go). MetadataTimeout bounds all their requests together [1s].
	GCEMetadataHost string // GCE_METADATA_HOST: host[:port] of the GCE metadata server [metadata.google.internal]
	GCPMetadata     string // GCP_METADATA: PROJECT_ID|PROJECT_NUMBER|CLUSTER_NAME|CLUSTER_LOCATION; when set, the server is not asked
	GCPQuotaProject string // GCP_QUOTA_PROJECT: gcp_quota_project, with GCP_METADATA only
	GCPZone         string // GCP_ZONE: the zone (and so the locality), with GCP_METADATA only
	ResolvConf      string // read for the GKE zone in its search line [/etc/resolv.conf]
	AWSMetadataURL  string // AWS_EC2_METADATA_SERVICE_ENDPOINT: base URL of the EC2 IMDS [http://169.254.169.254]
	MetadataTimeout time.Duration
	HTTPClient      *http.Client // nil: a client without proxy
}

func (c Config) resolvConf() string {
	if c.ResolvConf == "" {
		return "/etc/resolv.conf"
	}
	return c.ResolvConf
}

// Detection is a detection in progress. Its goroutine is owned by it: Wait or Close end it.
type Detection struct {
	done      chan struct{} // closed when result is set
	result    string        // written once before done is closed
	facts     Facts         // written once before factsDone is closed
	factsDone chan struct{}
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// Start begins detection and returns at once.
func Start(ctx context.Context, cfg Config) *Detection {
	d := &Detection{done: make(chan struct{}), factsDone: make(chan struct{})}
	if cfg.MetadataTimeout == 0 {
		cfg.MetadataTimeout = time.Second
	}
	if cfg.CloudPlatform == "" && len(gcpStatic(cfg)) > 0 {
		cfg.CloudPlatform = GCP // Istio's IsGCP: static GCP metadata means GCP (gcp.go)
	}
	if cfg.CloudPlatform != "" {
		d.result = strings.ToLower(cfg.CloudPlatform)
		close(d.done)
		mctx, cancel := context.WithTimeout(ctx, cfg.MetadataTimeout)
		d.cancel = cancel
		d.wg.Go(func() {
			defer close(d.factsDone)
			d.facts = fetchFacts(mctx, cfg, d.result)
		})
		return d
	}
	if cfg.DMIDir == "" {
		cfg.DMIDir = "/sys/class/dmi/id"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 100 * time.Millisecond
	}
	parent, stopAll := context.WithCancel(ctx) // Close stops detection and metadata requests
	ctx, stopDetect := context.WithTimeout(parent, cfg.Timeout)
	d.cancel = func() { stopDetect(); stopAll() }
	found := make(chan string, 1)
	d.wg.Go(func() { // the SMBIOS reads: local files, microseconds
		p := None
		for _, probe := range []func(string) string{aws, azure, gcp} {
			if q := probe(cfg.DMIDir); q != "" {
				p = q
				break
			}
		}
		found <- p
	})
	d.wg.Go(func() {
		defer close(d.factsDone)
		func() {
			defer close(d.done)
			d.result = None
			select {
			case <-ctx.Done():
			case d.result = <-found:
			}
		}()
		mctx, cancel := context.WithTimeout(parent, cfg.MetadataTimeout)
		defer cancel()
		d.facts = fetchFacts(mctx, cfg, d.result)
	})
	return d
}

// Facts returns the platform's facts, or the platform name alone if ctx ends first.
func (d *Detection) Facts(ctx context.Context) Facts {
	select {
	case <-d.factsDone:
		return d.facts
	case <-ctx.Done():
		return Facts{Name: d.Wait(ctx)}
	}
}

// Wait returns the platform, or "none" if ctx ends first.
func (d *Detection) Wait(ctx context.Context) string {
	select {
	case <-d.done:
		return d.result
	case <-ctx.Done():
		return None
	}
}

// Close stops detection and waits for it.
func (d *Detection) Close() {
	d.cancel()
	d.wg.Wait()
}

func read(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func aws(dir string) string {
	if strings.HasPrefix(strings.ToLower(read(dir, "product_uuid")), "ec2") ||
		strings.Contains(read(dir, "board_vendor"), "Amazon") || strings.Contains(read(dir, "sys_vendor"), "Amazon EC2") {
		return AWS
	}
	return ""
}

func azure(dir string) string {
	// Azure's well-known chassis asset tag.
	if read(dir, "chassis_asset_tag") == "7783-7084-3265-9085-8269-3286-77" {
		return Azure
	}
	return ""
}

func gcp(dir string) string {
	if strings.Contains(read(dir, "product_name"), "Google Compute Engine") || read(dir, "bios_vendor") == "Google" {
		return GCP
	}
	return ""
}
