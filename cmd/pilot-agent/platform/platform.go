// Package platform detects the cloud the agent runs on without putting a probe on the start-up
// path: CLOUD_PLATFORM decides at once when set ("none" skips detection), otherwise detection runs
// in the background, reads only local SMBIOS files (no metadata-server round trip),
// and is bounded by Config.Timeout. Istio's agent probes metadata servers synchronously at start,
// which has cost 5-90 s (istio/istio#19868, #37832, #39950).
package platform

import (
	"context"
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
}

// Detection is a detection in progress. Its goroutine is owned by it: Wait or Close end it.
type Detection struct {
	done   chan struct{} // closed when result is set
	result string        // written once before done is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start begins detection and returns at once.
func Start(ctx context.Context, cfg Config) *Detection {
	d := &Detection{done: make(chan struct{})}
	if cfg.CloudPlatform != "" {
		d.result = strings.ToLower(cfg.CloudPlatform)
		d.cancel = func() {}
		close(d.done)
		return d
	}
	if cfg.DMIDir == "" {
		cfg.DMIDir = "/sys/class/dmi/id"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 100 * time.Millisecond
	}
	ctx, d.cancel = context.WithTimeout(ctx, cfg.Timeout)
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
		defer close(d.done)
		d.result = None
		select {
		case <-ctx.Done():
		case d.result = <-found:
		}
	})
	return d
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
