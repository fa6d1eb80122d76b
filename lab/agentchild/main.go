// Command agentchild runs one xDS proxy and Wingman's SDS server in a process of its own, laid
// out like a pod (paths relative to the working directory, as pilot-agent), so the performance
// harness can measure a proxy's process: -mode=mux runs Wingman's mux, -mode=ref the reference
// (lab/refagent: decode and re-encode, one upstream connection per stream). Both share the same
// certificate and SDS code, so the two modes differ only in how xDS is forwarded.
package main

import (
	"context"
	"errors"
	_ "expvar" // runtime counters (allocations) for the harness, on -pprof only
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // profiles for `make pprof`, on -pprof only
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/wingman-mesh/wingman/certs"
	"github.com/wingman-mesh/wingman/lab/refagent"
	"github.com/wingman-mesh/wingman/mux"
)

// Paths relative to the working directory, as Istio's agent uses them.
const (
	xdsSocket = "./etc/istio/proxy/XDS"
	sdsSocket = "./var/run/secrets/workload-spiffe-uds/socket"
	tokenPath = "./var/run/secrets/tokens/istio-token"
	rootPath  = "./var/run/secrets/istio/root-cert.pem"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "agentchild:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agentchild", flag.ContinueOnError)
	mode := fs.String("mode", "mux", "mux (Wingman) or ref (the reference)")
	discovery := fs.String("discovery", "", "Istiod host:port (TLS; also the CA)")
	ttl := fs.Duration("secret-ttl", 24*time.Hour, "workload certificate TTL")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if *discovery == "" {
		return errors.New("-discovery is required")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	goRun := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel(err)
			}
		})
	}
	if *pprofAddr != "" {
		srv := &http.Server{Addr: *pprofAddr}
		l, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return fmt.Errorf("pprof listen: %w", err)
		}
		goRun("pprof", func(ctx context.Context) error {
			go func() { <-ctx.Done(); srv.Close() }()
			if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := certs.NewManager(certs.Config{Logger: log, Namespace: "default", ServiceAccount: "perf", KeyType: certs.KeyECDSA,
		SecretTTL: *ttl, CAAddr: *discovery, CARootPath: rootPath, TokenPath: tokenPath,
		ClusterID: "Kubernetes", SDSSocketPath: sdsSocket})
	if err != nil {
		return err
	}
	goRun("certs", m.Run)
	goRun("sds", certs.NewServer(m).Run)
	switch *mode {
	case "mux":
		p, err := mux.New(mux.Config{SocketPath: xdsSocket, Logger: log, Upstream: mux.UpstreamConfig{Address: *discovery,
			RootCAFile: rootPath, ServerName: "istiod.istio-system.svc", TokenFile: tokenPath,
			Metadata: map[string]string{"ClusterID": "Kubernetes"}}})
		if err != nil {
			cancel(err)
			wg.Wait()
			return err
		}
		goRun("mux", p.Run)
	case "ref":
		p, err := refagent.New(refagent.Config{Upstream: *discovery, RootCAFile: rootPath,
			ServerName: "istiod.istio-system.svc", TokenFile: tokenPath, Metadata: map[string]string{"ClusterID": "Kubernetes"}})
		if err == nil {
			var l net.Listener
			if l, err = mux.Listen(xdsSocket); err == nil {
				goRun("refagent", func(ctx context.Context) error { return p.Serve(ctx, l) })
			}
		}
		if err != nil {
			cancel(err)
			wg.Wait()
			return err
		}
	default:
		cancel(nil)
		wg.Wait()
		return fmt.Errorf("-mode %q: want mux or ref", *mode)
	}
	wg.Wait()
	close(errs)
	return <-errs
}
