// Command floorfwd is the process floor of the performance harness (perf): the least a sidecar
// agent can do to carry xDS from the control plane to Envoy. It listens on a Unix socket, and for
// each connection Envoy (the stand-in) makes it dials one TLS connection to the control plane and
// moves HTTP/2 frames between them: DATA payloads are copied as they are read, header blocks from
// the control plane are passed through unchanged, Envoy's request headers are re-encoded with the
// bearer token and cluster id added, and flow control, SETTINGS and PING are answered per hop.
// Nothing is decoded, buffered beyond one frame, logged or counted. The harness runs it beside the
// agent in the same run, so the agent's CPU per MB is read against the floor of a whole process:
// TLS, two sockets, syscalls, the scheduler and the garbage collector included.
//
// Usage:
//
//	floorfwd -listen PATH -upstream HOST:PORT -root ROOT.pem -server-name NAME -token TOKEN [-meta K=V]... [-cpuprofile FILE]
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "floorfwd:", err)
		os.Exit(1)
	}
}

type metaFlag [][2]string

func (m *metaFlag) String() string { return fmt.Sprint(*m) }
func (m *metaFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	*m = append(*m, [2]string{strings.ToLower(k), v})
	return nil
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("floorfwd", flag.ContinueOnError)
	listen := fs.String("listen", "", "Unix socket to serve Envoy on")
	up := fs.String("upstream", "", "control plane host:port (TLS, HTTP/2)")
	root := fs.String("root", "", "PEM file of the control plane's root certificate")
	name := fs.String("server-name", "", "name the control plane's certificate must carry")
	token := fs.String("token", "", "bearer token sent as the authorization header")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (perf's -pprof)")
	var meta metaFlag
	fs.Var(&meta, "meta", "further request header KEY=VALUE (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if *listen == "" || *up == "" || *root == "" {
		return errors.New("-listen, -upstream and -root are required")
	}
	pem, err := os.ReadFile(*root)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s: no certificate", *root)
	}
	extra := meta
	if *token != "" {
		extra = append(metaFlag{{"authorization", "Bearer " + *token}}, extra...)
	}
	cfg := upstream{addr: *up, tls: &tls.Config{RootCAs: pool, ServerName: *name, NextProtos: []string{"h2"},
		MinVersion: tls.VersionTLS12}, extra: extra}
	_ = os.Remove(*listen)
	ln, err := net.Listen("unix", *listen)
	if err != nil {
		return err
	}
	return serve(ctx, ln, cfg)
}
