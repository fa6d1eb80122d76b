package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// base is the fixed head of Istio's Envoy command line for a bootstrap at /b.json with default
// durations, minus the IP version (pkg/envoy/proxy.go args()).
func base(ipVersion string) []string {
	return []string{"-c", "/b.json", "--drain-time-s", "45", "--drain-strategy", "immediate",
		"--local-address-ip-version", ipVersion, "--file-flush-interval-msec", "1000",
		"--disable-hot-restart", "--allow-unknown-static-fields"}
}

func TestArgsMatchIstio(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"defaults", Config{LogLevel: "warning"}, append(base("v4"), "-l", "warning")},
		{"injector defaults", Config{LogLevel: "warning", SkipDeprecatedLogs: true, NodeIPs: []string{"10.0.0.5"}},
			append(base("v4"), "-l", "warning", "--skip-deprecated-logs")},
		{"ipv6 only", Config{LogLevel: "info", NodeIPs: []string{"fd00::5", "fe80::1"}},
			append(base("v6"), "-l", "info")},
		{"dual stack is v4", Config{LogLevel: "info", NodeIPs: []string{"fd00::5", "10.0.0.5"}},
			append(base("v4"), "-l", "info")},
		{"component levels embedded win", Config{LogLevel: "info,misc:error,upstream:debug", ComponentLogLevel: "rbac:debug"},
			append(base("v4"), "-l", "info", "--component-log-level", "misc:error,upstream:debug")},
		{"component flag used alone", Config{LogLevel: "debug", ComponentLogLevel: "rbac:debug"},
			append(base("v4"), "-l", "debug", "--component-log-level", "rbac:debug")},
		{"bad component dropped", Config{LogLevel: "info,a:b:c"}, append(base("v4"), "-l", "info")},
		{"everything", Config{LogLevel: "trace", DrainDuration: 10 * time.Second, FileFlushInterval: 250 * time.Millisecond,
			FileFlushMinSizeKB: 64, SkipDeprecatedLogs: true, EnableCoreDump: true, ConfigYAML: `{"a":1}`, Concurrency: 2},
			[]string{"-c", "/b.json", "--drain-time-s", "10", "--drain-strategy", "immediate",
				"--local-address-ip-version", "v4", "--file-flush-interval-msec", "250",
				"--disable-hot-restart", "--allow-unknown-static-fields", "--file-flush-min-size-kb", "64",
				"-l", "trace", "--skip-deprecated-logs", "--enable-core-dump", "--config-yaml", `{"a":1}`,
				"--concurrency", "2"}},
		{"concurrency 0 not passed", Config{LogLevel: "warning", Concurrency: 0}, append(base("v4"), "-l", "warning")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.BootstrapPath = "/b.json"
			if got := Args(tc.cfg); !slices.Equal(got, tc.want) {
				t.Errorf("Args =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestBootstrapOverrideJSON(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "override.yaml")
	if err := os.WriteFile(p, []byte("tracing:\n  address: '$(HOST_IP):8126'\n  other: '[$(HOST_IP)]:1'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ host, want string }{
		{"10.1.2.3", `{"tracing":{"address":"10.1.2.3:8126","other":"[10.1.2.3]:1"}}`},
		{"fd00::1", `{"tracing":{"address":"[fd00::1]:8126","other":"[fd00::1]:1"}}`},
	} {
		got, err := BootstrapOverrideJSON(p, tc.host)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("host %s: got %s want %s", tc.host, got, tc.want)
		}
	}
	if _, err := BootstrapOverrideJSON(filepath.Join(dir, "missing"), ""); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestActiveConnections(t *testing.T) {
	excl := excludedListeners([]int{15021, 15090, 0})
	for _, tc := range []struct {
		name, body string
		n          uint64
		ok         bool
	}{
		{"empty", "", 0, false},
		{"istio sample", "http.inbound_0.0.0.0_8080.downstream_cx_active: 4\n" +
			"listener.0.0.0.0_15006.downstream_cx_active: 2\n" +
			"listener.0.0.0.0_15006.worker_0.downstream_cx_active: 2\n" +
			"listener.0.0.0.0_15021.downstream_cx_active: 9\n" +
			"listener.0.0.0.0_15090.downstream_cx_active: 9\n" +
			"listener.admin.downstream_cx_active: 1\n" +
			"listener.admin.main_thread.downstream_cx_active: 1\n" +
			"listener.envoy_internal_connect_originate.downstream_cx_active: 3\n" +
			"listener.10.0.0.5_8443.downstream_cx_active: 1", 3, true},
		{"ipv6 names", "listener.[__]_15006.downstream_cx_active: 5\nlistener.[__]_15021.downstream_cx_active: 1\n", 5, true},
		{"only zeros", "listener.0.0.0.0_15001.downstream_cx_active: 0\n", 0, true},
		{"garbage values skipped", "listener.x.downstream_cx_active: lots\nlistener.y.downstream_cx_active: 1\n", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := activeConnections([]byte(tc.body), excl)
			if n != tc.n || ok != tc.ok {
				t.Errorf("got (%d, %v) want (%d, %v)", n, ok, tc.n, tc.ok)
			}
		})
	}
}

func FuzzActiveConnections(f *testing.F) {
	f.Add([]byte("listener.0.0.0.0_15006.downstream_cx_active: 2\nlistener.admin.downstream_cx_active: 1\n"))
	f.Add([]byte("listener.[__]_15006.downstream_cx_active: 18446744073709551615\n:\n\n"))
	excl := excludedListeners([]int{15021})
	f.Fuzz(func(t *testing.T, body []byte) {
		n, ok := activeConnections(body, excl)
		if !ok && n != 0 {
			t.Fatalf("no stats but %d connections", n)
		}
	})
}

func FuzzSplitComponentLog(f *testing.F) {
	f.Add("info,misc:error,upstream:debug")
	f.Add("a:b:c,,")
	f.Fuzz(func(t *testing.T, s string) {
		level, comps := SplitComponentLog(s)
		if strings.Contains(level, ":") || strings.Contains(level, ",") {
			t.Fatalf("level %q holds a separator", level)
		}
		for _, c := range comps {
			if strings.Count(c, ":") != 1 {
				t.Fatalf("component %q", c)
			}
		}
	})
}
