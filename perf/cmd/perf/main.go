// Command perf runs Wingman's end-to-end performance harness (package perf) and writes the
// report; with -gate it also compares the ratios and allocation budgets against a baseline and
// exits 1 on a regression. `make perf`, `make perf-gate` and `make pprof` call it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wingman-mesh/wingman/perf"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	agent := fs.String("agent", "", "pilot-agent binary to measure (empty: Wingman's mux in lab/agentchild)")
	scen := fs.String("scenarios", "", "comma-separated scenarios, or none (default all: "+strings.Join(perf.ScenarioNames(), ",")+")")
	runs := fs.Int("runs", 3, "interleaved runs of each scenario per agent")
	short := fs.Bool("short", false, "smaller scenarios (CI)")
	rsaKeys := fs.Bool("rsa", false, "the pilot-agent binary makes RSA-2048 keys (Istio's default) instead of ECDSA")
	dense := fs.Int("dense", 0, "pods in the dense-node scenario (0 skips it)")
	out := fs.String("out", "perf/results", "directory for the report (empty: none)")
	baseline := fs.String("baseline", "perf/baseline.json", "baseline for -gate")
	gate := fs.Bool("gate", false, "fail when a ratio or allocation budget regresses against -baseline")
	prof := fs.String("pprof", "", "save CPU and heap profiles of Wingman's agent (and the floor forwarder's CPU profile) into this directory")
	profSecs := fs.Int("pprof-seconds", 20, "with -pprof: how long the large scenarios push, and the binary's CPU profile of those pushes lasts")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on one scenario run")
	verbose := fs.Bool("v", false, "log each step")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	work, err := os.MkdirTemp("", "perf")
	if err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		return 1
	}
	defer os.RemoveAll(work)
	bins, err := perf.Build(ctx, work, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perf: step build:", err)
		return 1
	}
	if *agent != "" {
		if bins.Agent, err = filepath.Abs(*agent); err != nil {
			fmt.Fprintln(os.Stderr, "perf:", err)
			return 1
		}
	}
	cfg := perf.Config{Bins: bins, WorkDir: work, Runs: *runs, Short: *short, Dense: *dense, RSAKeys: *rsaKeys,
		ScenarioTimeout: *timeout, Logger: log, ProfileSeconds: *profSecs}
	switch *scen {
	case "":
	case "none": // only the dense node
		cfg.Scenarios = []string{}
	default:
		cfg.Scenarios = strings.Split(*scen, ",")
	}
	if *prof != "" {
		if cfg.Profile, err = filepath.Abs(*prof); err != nil {
			fmt.Fprintln(os.Stderr, "perf:", err)
			return 1
		}
	}
	rep, runErr := perf.Run(ctx, cfg)
	if runErr != nil {
		fmt.Fprintln(os.Stderr, runErr)
	}
	if rep == nil {
		return 1
	}
	sum := perf.Summarize(rep)
	if *out != "" {
		path, err := perf.WriteReport(*out, rep, sum, "go run ./perf/cmd/perf "+strings.Join(os.Args[1:], " "))
		if err != nil {
			fmt.Fprintln(os.Stderr, "perf: step report:", err)
			return 1
		}
		fmt.Println("report:", path)
	}
	b, _ := json.MarshalIndent(sum, "", "  ")
	fmt.Println(string(b))
	if runErr != nil {
		return 1
	}
	if *gate {
		base, err := perf.LoadBaseline(*baseline)
		if err != nil {
			fmt.Fprintln(os.Stderr, "perf: step gate:", err)
			return 1
		}
		fails := base.Check(sum)
		for _, f := range fails {
			fmt.Fprintln(os.Stderr, "perf gate:", f)
		}
		if len(fails) > 0 {
			return 1
		}
		fmt.Println("perf gate: pass")
	}
	return 0
}
