// Command meshlab is a local control plane for development and demos: it stands in for Istiod
// on one machine, serving xDS from a folder of Envoy resource files (reloaded on change) and an
// Istio-compatible CA on one TLS port, and writing the root certificate and the token an agent
// started under -out reads. See lab/meshlab.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/wingman-mesh/wingman/lab/meshlab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run is meshlab until ctx is done; it returns the exit code (2 for bad flags, 1 for a bad
// resources folder or a port in use).
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("meshlab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:15012", "address to serve xDS and the CA on (TLS)")
	dir := fs.String("resources", "", "folder of resource files (.yaml, .yml, .json) to serve; reloaded on change (required)")
	out := fs.String("out", "", "root directory under which var/run/secrets/istio/root-cert.pem and var/run/secrets/tokens/istio-token are written (the agent's working directory)")
	ttl := fs.Duration("cert-ttl", 24*time.Hour, "maximum validity of the workload certificates the CA signs")
	token := fs.String("token", "", "bearer token callers must present (default: a random one, written under -out)")
	verbose := fs.Bool("v", false, "log every stream and push")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: meshlab -resources DIR [-listen ADDR] [-out DIR] [-cert-ttl D]\n\n"+
			"A local control plane: xDS (SotW and Delta ADS) from a folder of YAML resources and an\n"+
			"Istio-compatible CA, on one TLS port with a bearer-token check.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "meshlab: -resources is required")
		fs.Usage()
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	srv, err := meshlab.New(meshlab.Config{
		ResourcesDir: *dir, OutputDir: *out, Token: *token, CertTTL: *ttl, Logger: log,
		OnPush: func(p meshlab.Push) {
			log.Debug("meshlab: pushed", "type", p.TypeURL, "resources", p.Resources, "node", p.Node, "delta", p.Delta)
		},
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "meshlab: listen %s: %v\n", *listen, err)
		return 1
	}
	if *out != "" {
		log.Info("meshlab: agent files written", "root", *out, "cert", meshlab.RootCertPath, "token", meshlab.TokenPath)
	}
	if err := srv.Serve(ctx, lis); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
