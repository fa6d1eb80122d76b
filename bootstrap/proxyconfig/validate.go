package proxyconfig

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// Validate checks the rules of Istio's agent-side ProxyConfig validation that would otherwise make
// Envoy or the agent fail later with a less clear message. The error names the field (JSON name).
func Validate(pc *meshapi.ProxyConfig) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("field %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if pc.GetConfigPath() == "" {
		bad("configPath", "must be set")
	}
	if pc.GetBinaryPath() == "" {
		bad("binaryPath", "must be set")
	}
	if err := checkPort(pc.GetProxyAdminPort()); err != nil {
		bad("proxyAdminPort", "%v", err)
	}
	if err := checkPort(pc.GetStatusPort()); err != nil {
		bad("statusPort", "%v", err)
	}
	if err := checkHostPort(pc.GetDiscoveryAddress()); err != nil {
		bad("discoveryAddress", "%v", err)
	}
	checkDur := func(field string, d *durationpb.Duration) {
		if d == nil {
			return
		}
		if err := d.CheckValid(); err != nil {
			bad(field, "%v", err)
		} else if d.AsDuration() < 0 {
			bad(field, "%s is negative", d.AsDuration())
		}
	}
	checkDur("drainDuration", pc.GetDrainDuration())
	checkDur("terminationDrainDuration", pc.GetTerminationDrainDuration())
	if c := pc.GetConcurrency(); c != nil && c.GetValue() < 0 {
		bad("concurrency", "%d is negative", c.GetValue())
	}
	if n := pc.GetStatNameLength(); n < 0 {
		bad("statNameLength", "%d is negative", n)
	}
	if a := pc.GetStatsdUdpAddress(); a != "" {
		if err := checkHostPort(a); err != nil {
			bad("statsdUdpAddress", "%v", err)
		}
	}
	if a := pc.GetEnvoyMetricsService().GetAddress(); a != "" {
		if err := checkHostPort(a); err != nil {
			bad("envoyMetricsService.address", "%v", err)
		}
	}
	if a := pc.GetEnvoyAccessLogService().GetAddress(); a != "" {
		if err := checkHostPort(a); err != nil {
			bad("envoyAccessLogService.address", "%v", err)
		}
	}
	if t := pc.GetTracing(); t != nil {
		if s := t.GetSampling(); s < 0 || s > 100 {
			bad("tracing.sampling", "%v is outside [0, 100]", s)
		}
		check := func(field, addr string) {
			if err := checkHostPort(addr); err != nil {
				bad(field, "%v", err)
			}
		}
		switch tr := t.GetTracer().(type) {
		case *meshapi.Tracing_Zipkin_:
			check("tracing.zipkin.address", tr.Zipkin.GetAddress())
		case *meshapi.Tracing_Lightstep_:
			check("tracing.lightstep.address", tr.Lightstep.GetAddress())
		case *meshapi.Tracing_Datadog_:
			check("tracing.datadog.address", tr.Datadog.GetAddress())
		}
	}
	return errors.Join(errs...)
}

func checkPort(p int32) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("port %d is outside 1-65535", p)
	}
	return nil
}

// checkHostPort accepts host:port where host may be $(HOST_IP), a name or an IP literal.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("%q has an empty host", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("%q: port %q is not a number", addr, port)
	}
	return checkPort(int32(min(max(p, -1), 1<<20)))
}
