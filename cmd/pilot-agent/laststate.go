package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/wingman-mesh/wingman/certs"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/lifecycle"
	"github.com/wingman-mesh/wingman/dns"
	"github.com/wingman-mesh/wingman/internal/istiolog"
	"github.com/wingman-mesh/wingman/internal/metric"
	"github.com/wingman-mesh/wingman/laststate"
	"github.com/wingman-mesh/wingman/mux"
)

// lastStateParts are the recorder and, when restoring, the restored state (WINGMAN_LAST_STATE).
type lastStateParts struct {
	rec     *laststate.Recorder // nil: nothing recorded
	restore *laststate.Source   // nil: nothing restored
}

// apply sets the proxy's hooks (never a typed nil in an interface).
func (ls lastStateParts) apply(c *mux.Config) {
	if ls.rec != nil {
		c.Recorder = ls.rec
	}
	if ls.restore != nil {
		c.Restore = ls.restore
	}
}

// service is the recorder's goroutine, with the certificate changes it follows.
func (ls lastStateParts) service(m *certs.Manager) *lifecycle.Service {
	if ls.rec == nil {
		return nil
	}
	return &lifecycle.Service{Name: "last-state", KeepDuringDrain: true, Run: func(ctx context.Context) error {
		ch := make(chan struct{}, 1)
		cancel := m.Subscribe(ch)
		defer cancel()
		var wg sync.WaitGroup
		defer wg.Wait()
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		wg.Go(func() {
			for {
				select {
				case <-ch:
					ls.rec.CertsChanged()
				case <-wctx.Done():
					return
				}
			}
		})
		return ls.rec.Run(ctx)
	}}
}

// nameTableHandler is the agent's NDS handler: each NameTable Istiod sends goes to the DNS proxy
// and, once the proxy took it, to the recorder (the resource's bytes as received). A restored
// table is replaced the same way when Istiod is back.
func (ls lastStateParts) nameTableHandler(d *dns.Server) mux.Handler {
	rec := ls.rec
	return func(res [][]byte) error {
		if err := d.UpdateNameTable(res[0]); err != nil {
			return err
		}
		if rec != nil {
			rec.NameTable(res[0])
		}
		return nil
	}
}

// lastState builds the last-state parts: off unless WINGMAN_LAST_STATE is set and the agent has
// a CA-signed certificate to keep; refused, named, unless the proxy directory is a tmpfs. It
// restores the snapshot when Istiod cannot be reached within laststate.DialBudget and the
// snapshot is this pod's, in date and verified; otherwise the agent starts as without it, with
// one warning saying why. Restoring, the DNS proxy d (nil: not running) gets the snapshot's name
// table here, before the xDS proxy serves Envoy anything.
func (a *agent) lastState(reg *metric.Registry, m *certs.Manager, d *dns.Server) lastStateParts {
	env := a.env
	if !env.LastState {
		return lastStateParts{}
	}
	log := a.logger(istiolog.ScopeLastState)
	if m == nil || env.FileMountedCerts {
		log.Warn("WINGMAN_LAST_STATE is set but the workload certificate does not come from the CA; nothing is recorded")
		return lastStateParts{}
	}
	dir := a.settings.ConfigPath
	id := laststate.Identity{NodeID: a.nodeID(), Namespace: env.PodNamespace, ServiceAccount: env.ServiceAccount, TrustDomain: env.TrustDomain}
	prefixed := reg.WithPrefix("istio_agent_")
	rec, err := laststate.NewRecorder(laststate.RecorderConfig{Dir: dir, Identity: id, Logger: log, Registry: prefixed,
		Certs: func() (laststate.Certs, bool) {
			chain, key, roots, ok := m.Current()
			return laststate.Certs{Chain: chain, Key: key, Roots: roots}, ok
		}})
	if err != nil {
		log.Warn("WINGMAN_LAST_STATE is set but no snapshot is kept or restored", "err", err)
		return lastStateParts{}
	}
	ls := lastStateParts{rec: rec}
	now := time.Now()
	snap, err := laststate.Load(dir, 0)
	defer func() {
		if err == nil && ls.restore == nil {
			snap.Close() // not served: the source would own it
		}
	}()
	if err == nil && snap.Identity == id {
		if serr := rec.Seed(snap); serr != nil {
			log.Warn("last-state snapshot not carried over", "err", serr)
		}
	}
	if err == nil {
		err = snap.Check(id, now)
	}
	if err != nil {
		log.Warn("last-state snapshot not restored; starting without it", "reason", reason(err))
		return ls
	}
	unreachable, why := laststate.Unreachable(context.Background(), a.settings.DiscoveryAddress, laststate.DialBudget)
	if !unreachable {
		log.Info("Istiod reachable; the last-state snapshot is not restored", "written", snap.Written.UTC().Format(time.RFC3339))
		return ls
	}
	var table []byte // read before anything is applied: a failure leaves the agent as it was
	if d != nil {
		if table, err = snap.ReadNameTable(); err != nil {
			log.Warn("last-state snapshot not restored; starting without it", "reason", reason(err))
			return ls
		}
	}
	if serr := m.Seed(snap.Certs.Chain, snap.Certs.Key, snap.Certs.Roots); serr != nil {
		log.Warn("last-state snapshot not restored; starting without it", "reason", reason(serr))
		return ls
	}
	dnsTable := "" // the log line's word on the DNS proxy's table; empty: no DNS proxy
	switch {
	case d == nil:
	case snap.NameTable == nil:
		dnsTable = "none in the snapshot: mesh names resolve once Istiod answers"
	default:
		// Check decoded it as UpdateNameTable does: this does not fail on a checked snapshot.
		if uerr := d.UpdateNameTable(table); uerr != nil {
			dnsTable = "not restored: " + uerr.Error()
		} else {
			dnsTable = fmt.Sprintf("restored (%d bytes)", len(table))
		}
	}
	ls.restore = laststate.NewSource(snap, prefixed, log)
	attrs := []any{"why", fmt.Sprintf("Istiod at %s not reachable within %v: %v", a.settings.DiscoveryAddress, laststate.DialBudget, why),
		"age", now.Sub(snap.Written).Round(time.Millisecond), "written", snap.Written.UTC().Format(time.RFC3339), "versions", strings.Join(snap.Versions(), ",")}
	if dnsTable != "" {
		attrs = append(attrs, "dns_name_table", dnsTable)
	}
	log.Info("serving the last-state snapshot until Istiod answers", attrs...)
	return ls
}

// reason words a snapshot refusal.
func reason(err error) string {
	if errors.Is(err, laststate.ErrNotExist) {
		return "no snapshot in " + laststate.FileName
	}
	return err.Error()
}
