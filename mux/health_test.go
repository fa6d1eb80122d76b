package mux

import (
	"context"
	"fmt"
	"testing"

	"github.com/wingman-mesh/wingman/fastpath"
)

// healthSeen returns the HealthInformation requests Istiod received, as "healthy" or the
// error_detail "<code> <message>", in order.
func (i *istiod) healthSeen() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []string
	add := func(typeURL string, code int32, msg string, nack bool) {
		if typeURL != fastpath.HealthInfoType {
			return
		}
		if !nack {
			out = append(out, "healthy")
			return
		}
		out = append(out, fmt.Sprintf("%d %s", code, msg))
	}
	for _, r := range i.requests {
		add(r.TypeUrl, r.GetErrorDetail().GetCode(), r.GetErrorDetail().GetMessage(), r.ErrorDetail != nil)
	}
	for _, r := range i.deltas {
		add(r.TypeUrl, r.GetErrorDetail().GetCode(), r.GetErrorDetail().GetMessage(), r.ErrorDetail != nil)
	}
	return out
}

// waitHealth waits until Istiod has received want as its latest health request, n in all.
func (i *istiod) waitHealth(ctx context.Context, n int, want string) error {
	for {
		got := i.healthSeen()
		if len(got) >= n && got[len(got)-1] == want {
			return nil
		}
		select {
		case <-i.reqSeen:
		case <-ctx.Done():
			return fmt.Errorf("health requests at Istiod %q, want %d ending with %q", got, n, want)
		}
	}
}

// TestHealthInformationReachesIstiod: with a readiness probe configured, the agent reports the
// workload's health to Istiod as Istio's agent does for VMs: a HealthInformation request on
// Envoy's ADS stream, with error_detail {500, message} when unhealthy, sent again after Istiod
// restarts (a new connection knows nothing of the old one), over SotW and Delta.
func TestHealthInformationReachesIstiod(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			i := newIstiod(t)
			i.caches[fastpath.ListenerType].SetResources(listeners(2))
			p, sock := testProxy(t, i, func(c *Config) { c.ReportHealth = true })
			ctx := testCtx(t)
			p.ReportHealth(false, "connection refused") // before Envoy connects: sent once it does
			send, _ := typeStream(t, ctx, adsClient(t, sock), delta)
			if err := send(fastpath.ListenerType); err != nil {
				t.Fatal(err)
			}
			if err := i.waitHealth(ctx, 1, "500 connection refused"); err != nil {
				t.Fatal(err)
			}
			p.ReportHealth(true, "")
			if err := i.waitHealth(ctx, 2, "healthy"); err != nil {
				t.Fatal(err)
			}
			i.stop()
			i.start()
			if err := i.waitHealth(ctx, 3, "healthy"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
