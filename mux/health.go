package mux

import "github.com/wingman-mesh/wingman/fastpath"

// healthReport is the workload's health as the agent last reported it. Immutable.
type healthReport struct {
	unhealthy *fastpath.Status // nil when healthy
}

// ReportHealth sends the workload's health to Istiod as Istio's agent does for VMs (ProxyConfig
// readinessProbe): a HealthInformation request, with error_detail {code 500, message} when
// unhealthy, on the upstream stream of the session that carries the agent's own subscriptions
// (Envoy's ADS stream). The latest report is sent again on every new upstream stream, and a
// report not yet sent is replaced by a newer one. It needs Config.ReportHealth.
func (p *Proxy) ReportHealth(healthy bool, message string) {
	r := &healthReport{}
	if !healthy {
		r.unhealthy = &fastpath.Status{Code: 500, Message: message}
	}
	p.health.Store(r)
	if s := p.agentOwner.Load(); s != nil {
		s.mu.Lock()
		s.pushHealthLocked()
		s.mu.Unlock()
	}
}

// pushHealthLocked queues the latest health report when this session carries the agent's
// requests. It coalesces with a pending one, so it never waits. s.mu must be held.
func (s *session) pushHealthLocked() {
	r := s.p.health.Load()
	if r == nil || !s.claimed {
		return
	}
	frame := fastpath.FrameOf(s.proto.ack(fastpath.HealthInfoType, "", "", r.unhealthy))
	_, _ = s.reqQ.tryPush(item{typeURL: fastpath.HealthInfoType, frame: frame, coalesce: true})
}
