package perf

import (
	"context"
	"fmt"
	"time"
)

// scenario is one measured situation. Immutable.
type scenario struct {
	order   int
	direct  bool          // also run the stand-in straight to the control plane
	floor   bool          // also run the floor forwarder (lab/floorfwd) as the agent
	certTTL time.Duration // the CA's cap on certificate lifetime (0 → 24h)
	run     func(ctx context.Context, e *env) (map[string]float64, []time.Duration, error)
}

var scenarios = map[string]scenario{
	"startup":        {order: 0, direct: true, run: startup},
	"small_rate":     {order: 1, direct: true, run: smallRate},
	"large_4mb":      {order: 2, direct: true, floor: true, run: large(4<<20, 100)},
	"large_10mb":     {order: 3, direct: true, floor: true, run: large(10<<20, 100)},
	"many_1500":      {order: 4, direct: true, floor: true, run: large(1500<<10, 1500)},
	"push_100kb":     {order: 9, direct: true, floor: true, run: large(100<<10, 50)},
	"downstreams_10": {order: 5, run: downstreams},
	"cert_rotation":  {order: 6, certTTL: 4 * time.Second, run: certRotation},
	"istiod_restart": {order: 7, run: istiodRestart},
	"slow_envoy":     {order: 8, run: slowEnvoy},
}

// waitReady waits until every stand-in of pods has its listeners and (behind an agent) its
// workload certificate; it returns the per-pod time to first config and first certificate.
func waitReady(ctx context.Context, e *env, mark int, pods ...*Pod) (cfg, cert []time.Duration, err error) {
	for _, p := range pods {
		for _, id := range p.StubIDs {
			ev, err := e.hub.Wait(ctx, mark, "first listeners at "+id, func(ev Event) bool {
				return ev.ID == id && ev.Ev == "push" && ev.Type == ListenerType
			})
			if err != nil {
				return nil, nil, err
			}
			if id == p.ID {
				cfg = append(cfg, ev.Time().Sub(p.Started))
			}
			if e.kind == Direct || e.kind == Floor {
				continue // no SDS
			}
			ev, err = e.hub.Wait(ctx, mark, "first certificate at "+id, func(ev Event) bool {
				return ev.ID == id && ev.Ev == "sds" && ev.Name == "default"
			})
			if err != nil {
				return nil, nil, err
			}
			if id == p.ID {
				cert = append(cert, ev.Time().Sub(p.Started))
			}
		}
	}
	return cfg, cert, nil
}

// probe is a reading of an agent's usage and allocation counters.
type probe struct {
	u                Usage
	mallocs, allocsB uint64
	allocsOK         bool
}

func read(ctx context.Context, p *Pod) (probe, error) {
	var pr probe
	if p.Agent == nil {
		return pr, nil
	}
	u, err := ReadUsage(p.Agent.Pid())
	if err != nil {
		return pr, err
	}
	pr.u = u
	pr.mallocs, pr.allocsB, pr.allocsOK = p.Allocs(ctx)
	return pr, nil
}

// settle lets an agent finish start-up work before idle readings.
func settle(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		return nil
	}
}

// startOne starts one pod and waits for it to be ready.
func startOne(ctx context.Context, e *env, spec podSpec) (*Pod, time.Duration, time.Duration, error) {
	mark := e.hub.Mark()
	p, err := e.start(ctx, spec)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("start pod: %w", err)
	}
	cfg, cert, err := waitReady(ctx, e, mark, p)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("pod ready: %w", err)
	}
	var c time.Duration
	if len(cert) > 0 {
		c = cert[0]
	}
	return p, cfg[0], c, nil
}
