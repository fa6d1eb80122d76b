// Command demo shows Wingman at work on one machine, with no Kubernetes, no Istiod and no Envoy
// needed: it starts meshlab (a local control plane: xDS from a folder of resources and an
// Istio-compatible CA) and the real `pilot-agent proxy sidecar` in a temporary root directory
// with the environment Istio's injector would set, then shows each part of the agent working:
// the workload certificate, Envoy's configuration through the xDS proxy and SDS, DNS from the
// NameTable, readiness, proxyless gRPC services calling each other over mTLS, a bad resource
// file rejected, a certificate rotation and a clean shutdown. It exits 0 when every step
// worked and 1 naming the failed step otherwise, and stops everything it started.
//
// Where an `envoy` binary is on PATH it runs it; otherwise it builds a stand-in
// (lab/envoystub) that speaks ADS and SDS to the agent and serves Envoy's admin stats.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var o Options
	flag.StringVar(&o.Agent, "agent", "", "pilot-agent binary to run (default: build ./cmd/pilot-agent)")
	flag.StringVar(&o.Envoy, "envoy", "", "Envoy binary (default: envoy on PATH, else the stand-in)")
	flag.BoolVar(&o.StandIn, "standin", false, "use the Envoy stand-in even when envoy is on PATH")
	flag.DurationVar(&o.CertTTL, "cert-ttl", 0, "workload certificate lifetime (default 10s, so that rotation shows)")
	flag.DurationVar(&o.Timeout, "timeout", 0, "bound on the whole run (default 2m)")
	flag.BoolVar(&o.Keep, "keep", false, "keep the temporary root directory (always kept after a failure)")
	flag.Parse()
	o.Out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
