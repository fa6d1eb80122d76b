package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/wingman-mesh/wingman/cmd/pilot-agent/lifecycle"
	"github.com/wingman-mesh/wingman/internal/istiolog"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
	"github.com/wingman-mesh/wingman/mux"
	"github.com/wingman-mesh/wingman/status/health"
)

// healthService runs ProxyConfig.readinessProbe (set for VMs from a WorkloadGroup) and reports
// each health change to Istiod over the xDS proxy, as Istio's agent does; nil without a probe.
// envoy, when not nil, is Envoy's readiness, checked first (Istio skips it with DISABLE_ENVOY).
func healthService(a *agent, proxy *mux.Proxy, envoy health.Prober) (*lifecycle.Service, error) {
	rp := a.proxyConfig.GetReadinessProbe()
	if rp == nil {
		return nil, nil
	}
	app, err := workloadProber(rp, a.identity.IPs)
	if err != nil {
		return nil, fmt.Errorf("ProxyConfig readinessProbe: %w", err)
	}
	c, err := health.New(health.Config{
		InitialDelay:     time.Duration(rp.GetInitialDelaySeconds()) * time.Second,
		Timeout:          time.Duration(rp.GetTimeoutSeconds()) * time.Second,
		Period:           time.Duration(rp.GetPeriodSeconds()) * time.Second,
		SuccessThreshold: int(rp.GetSuccessThreshold()), FailureThreshold: int(rp.GetFailureThreshold()),
		Envoy: envoy, App: app, Report: proxy.ReportHealth, Log: a.logger(istiolog.ScopeHealthCheck),
	})
	if err != nil {
		return nil, err
	}
	return &lifecycle.Service{Name: "workload-health", Run: c.Run}, nil
}

// workloadProber builds the probe of rp. HTTP probes come from 127.0.0.6 (::6 on IPv6-only
// pods), as Istio's agent sends them, so they are not captured as the application's traffic.
func workloadProber(rp *meshapi.ReadinessProbe, ips []string) (health.Prober, error) {
	switch {
	case rp.GetHttpGet() != nil:
		h := rp.GetHttpGet()
		cfg := health.HTTPGet{Scheme: h.GetScheme(), Host: h.GetHost(), Path: h.GetPath(), Port: int(h.GetPort()),
			LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 6)}}
		if ipv6Only(ips) {
			cfg.LocalAddr = &net.TCPAddr{IP: net.ParseIP("::6")}
		}
		for _, hd := range h.GetHttpHeaders() {
			cfg.Headers = append(cfg.Headers, health.Header{Name: hd.GetName(), Value: hd.GetValue()})
		}
		return health.NewHTTPProber(cfg), nil
	case rp.GetTcpSocket() != nil:
		t := rp.GetTcpSocket()
		return health.NewTCPProber(t.GetHost(), int(t.GetPort())), nil
	case rp.GetExec() != nil:
		return health.NewExecProber(rp.GetExec().GetCommand())
	case rp.GetGrpc() != nil:
		g := rp.GetGrpc()
		return health.NewGRPCProber(int(g.GetPort()), g.GetService()), nil
	}
	return nil, errors.New("no httpGet, tcpSocket, exec or grpc method")
}

func ipv6Only(ips []string) bool {
	if len(ips) == 0 {
		return false
	}
	for _, s := range ips {
		if ip := net.ParseIP(s); ip != nil && ip.To4() != nil {
			return false
		}
	}
	return true
}
