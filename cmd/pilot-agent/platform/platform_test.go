package platform

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dmi(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		files map[string]string
		want  string
	}{
		{"env wins", Config{CloudPlatform: "GCP"}, map[string]string{"product_uuid": "ec2abc"}, GCP},
		{"none skips", Config{CloudPlatform: "none"}, map[string]string{"product_uuid": "ec2abc"}, None},
		{"aws", Config{}, map[string]string{"product_uuid": "EC2E1916-9099-7CAF-FD21-012345ABCDEF"}, AWS},
		{"gcp", Config{}, map[string]string{"product_name": "Google Compute Engine"}, GCP},
		{"azure", Config{}, map[string]string{"chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77"}, Azure},
		{"bare metal", Config{}, map[string]string{"product_name": "PowerEdge"}, None},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.DMIDir = dmi(t, tc.files)
			tc.cfg.Timeout = 10 * time.Second
			d := Start(t.Context(), tc.cfg)
			defer d.Close()
			if got := d.Wait(t.Context()); got != tc.want {
				t.Errorf("got %q want %q", got, tc.want)
			}
		})
	}
}

func TestStartDoesNotBlock(t *testing.T) {
	// Nothing matches: detection ends with none.
	dir := t.TempDir()
	for _, n := range []string{"product_uuid", "board_vendor", "sys_vendor", "chassis_asset_tag", "product_name", "bios_vendor"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := Start(t.Context(), Config{DMIDir: dir, Timeout: 20 * time.Millisecond})
	if got := d.Wait(t.Context()); got != None {
		t.Errorf("got %q", got)
	}
	d.Close()
}
