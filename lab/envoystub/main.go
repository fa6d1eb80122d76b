// Command envoystub stands in for Envoy in Wingman's performance harness. The agent execs it
// with Envoy's arguments; it reads the bootstrap named by -c, opens ADS (state of the world or
// Delta, per ads_config.api_type) and SDS on the Unix sockets of the xds-grpc and sds-grpc
// clusters, decodes every resource as Envoy would, ACKs (or NACKs versions with a configured
// prefix), asks SDS for "default" and "ROOTCA", and serves the admin endpoints the agent's
// readiness and drain logic read. It reports what it sees as JSON lines (see event).
//
// Environment (read here, in a main package):
//
//	PERF_EVENTS       unix:<socket> to dial, or a file path to append to; default stdout
//	PERF_STUB_ID      the id put on every event (default the node id)
//	PERF_NACK_PREFIX  versions starting with this prefix are NACKed
//	PERF_SLOW_MS      pause before reading each ADS response (a slow Envoy)
//	PERF_ADMIN_PORT   overrides the bootstrap's admin port
//	PERF_XDS_ADDR     dial this host:port in plaintext instead of the xds-grpc pipe (direct mode)
//	PERF_AGENT_PID    the agent whose CPU time the start event reports (default the parent)
//	PERF_STALL_MS     on SIGUSR1, stop reading ADS responses for this long (default 30000): an
//	                  Envoy that stops reading (reported as "stall" and "unstall" events)
//	PERF_ACK_HOLD     when "1", ADS responses are read and reported but none is answered (ACK
//	                  or NACK) until SIGUSR2: an Envoy slow to apply a large configuration
//	                  (reported as "hold" and "release" events)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// initialised is when the process reached its main package (after the runtime's and every
// dependency's initialisation): the harness's "Envoy exec'd" instant, reported on the start event
// with the CPU time the agent had used by then (agentCPU) and the stand-in's own (ownCPU).
var (
	initialised = time.Now()
	agentCPU    = cpuOf(agentPID())
	ownCPU      = cpuOf(os.Getpid())
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "envoystub:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	path, err := configPath(args)
	if err != nil {
		return err
	}
	bs, err := readBootstrap(path)
	if err != nil {
		return err
	}
	ev, err := openEvents(os.Getenv("PERF_EVENTS"))
	if err != nil {
		return err
	}
	defer ev.close()
	id := os.Getenv("PERF_STUB_ID")
	if id == "" {
		id = bs.node.GetId()
	}
	ev.id = id
	slow := time.Duration(0)
	if s := os.Getenv("PERF_SLOW_MS"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms < 0 {
			return fmt.Errorf("PERF_SLOW_MS=%q: not a non-negative integer", s)
		}
		slow = time.Duration(ms) * time.Millisecond
	}
	if p := os.Getenv("PERF_ADMIN_PORT"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("PERF_ADMIN_PORT=%q: %w", p, err)
		}
		bs.adminPort = n
	}
	stall := 30 * time.Second
	if s := os.Getenv("PERF_STALL_MS"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms < 0 {
			return fmt.Errorf("PERF_STALL_MS=%q: not a non-negative integer", s)
		}
		stall = time.Duration(ms) * time.Millisecond
	}
	var hold chan struct{}
	switch h := os.Getenv("PERF_ACK_HOLD"); h {
	case "", "0":
	case "1":
		hold = make(chan struct{})
	default:
		return fmt.Errorf("PERF_ACK_HOLD=%q: want 1 or 0", h)
	}
	st := &state{}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	adm, err := startAdmin(bs.adminPort, st, func() { cancel(errQuit) })
	if err != nil {
		return err
	}
	defer adm.Close()
	ev.emit(event{Ev: "start", Api: bs.apiType, T0: initialised.UnixNano(), AgentCPU: agentCPU, CPU: ownCPU})

	x := &xdsClient{bs: bs, ev: ev, st: st, nackPrefix: os.Getenv("PERF_NACK_PREFIX"), slow: slow,
		direct: os.Getenv("PERF_XDS_ADDR"), stall: stall, hold: hold}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go x.stalls(ctx, usr1)
	if hold != nil {
		usr2 := make(chan os.Signal, 1)
		signal.Notify(usr2, syscall.SIGUSR2)
		defer signal.Stop(usr2)
		go x.releases(ctx, usr2)
	}
	done := make(chan error, 2)
	go func() { done <- x.run(ctx) }()
	nsds := 0
	if bs.sdsPipe != "" && x.direct == "" {
		nsds = 1
		go func() { done <- runSDS(ctx, bs, ev, st) }()
	}
	var first error
	for range 1 + nsds {
		err := <-done
		if first == nil && err != nil && ctx.Err() == nil {
			first = err
			cancel(err)
		}
	}
	if first != nil {
		return first
	}
	ev.emit(event{Ev: "exit"})
	return nil
}

// configPath finds Envoy's -c / --config-path argument.
func configPath(args []string) (string, error) {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "--config-path":
			if i+1 < len(args) {
				return args[i+1], nil
			}
		case len(a) > 14 && a[:14] == "--config-path=":
			return a[14:], nil
		}
	}
	return "", fmt.Errorf("no -c <bootstrap> among arguments %q", args)
}
