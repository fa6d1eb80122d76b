package supervisor

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Args returns Envoy's command line for c, in Istio's order (pkg/envoy/proxy.go): -c,
// --drain-time-s, --drain-strategy immediate, --local-address-ip-version, --file-flush-interval-msec,
// --disable-hot-restart, --allow-unknown-static-fields, [--file-flush-min-size-kb], -l,
// [--component-log-level], [--skip-deprecated-logs], [--enable-core-dump], [--config-yaml],
// [--concurrency]. Zero fields take the defaults New would apply.
func Args(c Config) []string {
	if c.DrainDuration == 0 {
		c.DrainDuration = DefaultDrainDuration
	}
	if c.FileFlushInterval == 0 {
		c.FileFlushInterval = DefaultFileFlush
	}
	ipVersion := "v4"
	if allIPv6(c.NodeIPs) {
		ipVersion = "v6"
	}
	args := make([]string, 0, 24)
	args = append(args,
		"-c", c.BootstrapPath,
		"--drain-time-s", strconv.Itoa(int(c.DrainDuration.Seconds())),
		"--drain-strategy", "immediate",
		"--local-address-ip-version", ipVersion,
		"--file-flush-interval-msec", strconv.FormatInt(c.FileFlushInterval.Milliseconds(), 10),
		"--disable-hot-restart",
		"--allow-unknown-static-fields",
	)
	if c.FileFlushMinSizeKB > 0 {
		args = append(args, "--file-flush-min-size-kb", strconv.Itoa(c.FileFlushMinSizeKB))
	}
	level, components := SplitComponentLog(c.LogLevel)
	if level != "" {
		args = append(args, "-l", level)
	}
	if len(components) > 0 {
		args = append(args, "--component-log-level", strings.Join(components, ","))
	} else if c.ComponentLogLevel != "" {
		args = append(args, "--component-log-level", c.ComponentLogLevel)
	}
	if c.SkipDeprecatedLogs {
		args = append(args, "--skip-deprecated-logs")
	}
	if c.EnableCoreDump {
		args = append(args, "--enable-core-dump")
	}
	if c.ConfigYAML != "" {
		args = append(args, "--config-yaml", c.ConfigYAML)
	}
	if c.Concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(c.Concurrency))
	}
	return args
}

// SplitComponentLog splits an Istio-style level ("info,misc:error,upstream:debug") into Envoy's
// -l level and its --component-log-level entries. Entries with more than one colon are dropped,
// as Istio drops them.
func SplitComponentLog(s string) (level string, components []string) {
	for part := range strings.SplitSeq(s, ",") {
		switch strings.Count(part, ":") {
		case 0:
			level = part
		case 1:
			components = append(components, part)
		}
	}
	return level, components
}

// allIPv6 reports whether ips is non-empty and every entry is an IPv6 address (Istio's
// network.AllIPv6; unparseable entries count as not IPv6).
func allIPv6(ips []string) bool {
	if len(ips) == 0 {
		return false
	}
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() || a.Is4In6() {
			return false
		}
	}
	return true
}

// BootstrapOverrideJSON reads the ISTIO_BOOTSTRAP_OVERRIDE file (YAML or JSON), substitutes
// $(HOST_IP) with hostIP (bracketed when IPv6, keeping explicit brackets single) and returns it as
// JSON for --config-yaml.
func BootstrapOverrideJSON(path, hostIP string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading bootstrap override %s: %w", path, err)
	}
	if strings.Contains(hostIP, ":") {
		hostIP = "[" + hostIP + "]"
		b = bytes.ReplaceAll(b, []byte("[$(HOST_IP)]"), []byte(hostIP))
	}
	b = bytes.ReplaceAll(b, []byte("$(HOST_IP)"), []byte(hostIP))
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return "", fmt.Errorf("converting bootstrap override %s to JSON: %w", path, err)
	}
	return string(j), nil
}
