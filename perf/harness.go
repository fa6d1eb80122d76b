package perf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config configures a harness run.
type Config struct {
	Bins Bins
	// WorkDir holds pod directories and the event socket (a short path: Unix socket paths are
	// limited to 108 bytes).
	WorkDir string
	// Scenarios to run, by name (see ScenarioNames); nil runs all of them, an empty list none.
	Scenarios []string
	// Runs is how many interleaved runs each scenario makes of each agent (default 3).
	Runs int
	// Short makes every scenario smaller (CI).
	Short bool
	// Dense is the number of pods of the dense-node scenario (0 skips it).
	Dense int
	// RSAKeys makes the pilot-agent binary use RSA-2048 keys, Istio's default (the reference
	// child stays on ECDSA); otherwise ECDSA P-256.
	RSAKeys bool
	// ScenarioTimeout bounds one run of one scenario for one agent (default 2 minutes).
	ScenarioTimeout time.Duration
	// Profile, when set, saves CPU and heap profiles of Wingman's agent in each scenario run
	// into this directory.
	Profile string
	// ProfileSeconds, with Profile, makes the pushes of the large scenarios last this long for
	// every agent, and takes the binary's CPU profile over exactly that window (its pprof
	// endpoint samples at 100 Hz: a few pushes give too few samples). 0: 20 s.
	ProfileSeconds int
	Logger         *slog.Logger
}

// Result is one run of one scenario for one agent.
type Result struct {
	Scenario  string
	Kind      Kind // wingman, reference, or "direct" (the stand-in straight to the control plane)
	Run       int
	Metrics   map[string]float64
	Latencies []time.Duration // push latencies through the agent (or direct)
}

// Report is everything a harness run measured.
type Report struct {
	Started    time.Time
	Elapsed    time.Duration
	Binary     bool  // Wingman ran as the real pilot-agent binary
	BinarySize int64 // bytes of Bins.Agent (0 when not given)
	Short      bool
	Runs       int
	Results    []Result
	Dense      []Result // one per kind
}

// Run runs the scenarios, interleaving Wingman and the reference run by run. On the first
// failure it stops what it started and returns the error, naming the scenario, run and agent,
// with the report of what had finished.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Runs <= 0 {
		cfg.Runs = 3
	}
	if cfg.ScenarioTimeout <= 0 {
		cfg.ScenarioTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Bins.Child == "" || cfg.Bins.Stub == "" {
		return nil, errors.New("perf: Bins.Child and Bins.Stub are required")
	}
	names := cfg.Scenarios
	if names == nil {
		names = ScenarioNames()
	}
	for _, n := range names {
		if _, ok := scenarios[n]; !ok {
			return nil, fmt.Errorf("perf: unknown scenario %q (known: %v)", n, ScenarioNames())
		}
	}
	rep := &Report{Started: time.Now(), Binary: cfg.Bins.Agent != "", Short: cfg.Short, Runs: cfg.Runs}
	if cfg.Bins.Agent != "" {
		st, err := os.Stat(cfg.Bins.Agent)
		if err != nil {
			return nil, fmt.Errorf("perf: agent binary: %w", err)
		}
		rep.BinarySize = st.Size()
	}
	if cfg.Profile != "" {
		if err := os.MkdirAll(cfg.Profile, 0o755); err != nil {
			return nil, fmt.Errorf("perf: profile directory: %w", err)
		}
	}
	hub, err := NewHub(filepath.Join(cfg.WorkDir, "ev.sock"))
	if err != nil {
		return nil, err
	}
	defer hub.Close()
	defer func() { rep.Elapsed = time.Since(rep.Started) }()
	for _, name := range names {
		sc := scenarios[name]
		for r := range cfg.Runs {
			kinds := []Kind{Wingman, Reference}
			if r%2 == 1 {
				kinds = []Kind{Reference, Wingman}
			}
			if sc.floor { // next to Wingman, whose CPU it is the floor of
				kinds = []Kind{Wingman, Floor, Reference}
				if r%2 == 1 {
					kinds = []Kind{Reference, Floor, Wingman}
				}
			}
			if sc.direct {
				kinds = append(kinds, Direct)
			}
			for _, k := range kinds {
				cfg.Logger.Info("scenario", "name", name, "run", r, "agent", k)
				res, err := runOne(ctx, cfg, hub, name, sc, k, r)
				if err != nil {
					return rep, fmt.Errorf("perf: scenario %s, run %d, agent %s: %w", name, r, k, err)
				}
				rep.Results = append(rep.Results, res)
			}
		}
	}
	if cfg.Dense > 0 {
		for _, k := range []Kind{Wingman, Reference} {
			cfg.Logger.Info("dense node", "pods", cfg.Dense, "agent", k)
			res, err := runDense(ctx, cfg, hub, k)
			if err != nil {
				return rep, fmt.Errorf("perf: dense node (%d pods), agent %s: %w", cfg.Dense, k, err)
			}
			rep.Dense = append(rep.Dense, res)
		}
	}
	return rep, nil
}

// env is what one scenario run gets. Immutable during the run, except through its parts.
type env struct {
	cfg      Config
	cp       *ControlPlane
	hub      *Hub
	dir      string
	kind     Kind
	name     string // scenario
	run      int
	runCtx   context.Context // the run's context, which outlives the scenario's own
	profiles sync.WaitGroup  // CPU profile downloads; waited for before the pods stop
	mu       sync.Mutex      // guards pods (the watcher reads it)
	pods     []*Pod
	short    bool
}

// start starts a pod of the run's kind and records it for stopping.
func (e *env) start(ctx context.Context, spec podSpec) (*Pod, error) {
	spec.kind = e.kind
	if spec.api == "" {
		spec.api = "DELTA_GRPC"
	}
	if spec.id == "" {
		spec.id = fmt.Sprintf("p%d", len(e.podList()))
	}
	spec.pprof = true
	if e.cfg.Profile != "" && (e.kind == Wingman || e.kind == Floor) && !spec.quick {
		spec.cpuProf = filepath.Join(e.cfg.Profile, fmt.Sprintf("%s-run%d-%s-%s.cpu.pprof", e.name, e.run, e.kind, spec.id))
	}
	spec.rsaKeys = e.cfg.RSAKeys
	p, err := startPod(ctx, e.dir, e.cfg.Bins, e.cp, e.hub, spec)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.pods = append(e.pods, p)
	e.mu.Unlock()
	if e.cfg.Profile != "" && p.Binary && !spec.quick && !spec.pushProf {
		// The binary's status port serves pprof: take a CPU profile of the next seconds.
		path := filepath.Join(e.cfg.Profile, fmt.Sprintf("%s-run%d-%s-%s.cpu.pprof", e.name, e.run, e.kind, spec.id))
		e.profiles.Go(func() {
			_ = fetchWhenUp(e.runCtx, "http://"+p.DebugAddr+"/debug/pprof/profile?seconds="+strconv.Itoa(binaryCPUProfileSeconds), path)
		})
	}
	return p, nil
}

// watch returns a context that is cancelled, with the exit error as its cause, as soon as a
// process of a pod exits; stop ends the watch and waits for it.
func (e *env) watch(ctx context.Context) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				if err := e.failed(); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	return wctx, func() { cancel(nil); <-done }
}

// podList is a snapshot of the pods started so far.
func (e *env) podList() []*Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.pods)
}

// stopAll stops every pod of the run, all at once (each agent drains on its own).
func (e *env) stopAll() {
	var wg sync.WaitGroup
	for _, p := range e.podList() {
		wg.Go(p.Stop)
	}
	wg.Wait()
}

// outputs is the last output of every process of the run, for error messages.
func (e *env) outputs() string {
	var b strings.Builder
	for _, p := range e.podList() {
		for _, pr := range append([]*Proc{p.Agent}, p.Stubs...) {
			if pr == nil {
				continue
			}
			if out := pr.out.String(); out != "" {
				fmt.Fprintf(&b, "\n  [%s] %s", pr.Name, lastLines(out, 6))
			}
		}
	}
	return b.String()
}

// failed returns the first pod process that has exited, or nil.
func (e *env) failed() error {
	for _, p := range e.podList() {
		if err := p.Failed(); err != nil {
			return err
		}
	}
	return nil
}

func runOne(ctx context.Context, cfg Config, hub *Hub, name string, sc scenario, k Kind, run int) (res Result, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.ScenarioTimeout, fmt.Errorf("scenario timed out after %v", cfg.ScenarioTimeout))
	defer cancel()
	dir, err := os.MkdirTemp(cfg.WorkDir, "r")
	if err != nil {
		return res, fmt.Errorf("make run directory: %w", err)
	}
	defer os.RemoveAll(dir)
	cp, err := StartControlPlane(ctx, ControlPlaneConfig{CertTTL: sc.certTTL})
	if err != nil {
		return res, fmt.Errorf("start control plane: %w", err)
	}
	defer cp.Close()
	e := &env{cfg: cfg, cp: cp, hub: hub, dir: dir, kind: k, short: cfg.Short, name: name, run: run, runCtx: ctx}
	defer e.stopAll()
	defer e.profiles.Wait()
	wctx, stopWatch := e.watch(ctx)
	defer stopWatch()
	if _, _, err := cp.Push(ClusterType, Clusters(10, 10<<10, "init")); err != nil {
		return res, err
	}
	if _, _, err := cp.Push(ListenerType, Listeners(2)); err != nil {
		return res, err
	}
	m, lat, err := sc.run(wctx, e)
	if err != nil {
		if c := context.Cause(wctx); c != nil && !errors.Is(c, context.Canceled) && !errors.Is(err, c) {
			err = fmt.Errorf("%w (cause: %v)", err, c)
		}
		return res, fmt.Errorf("%w%s", err, e.outputs())
	}
	if cfg.Profile != "" && k == Wingman {
		_ = saveProfiles(ctx, e, cfg.Profile, name, run)
	}
	return Result{Scenario: name, Kind: k, Run: run, Metrics: m, Latencies: lat}, nil
}

// ScenarioNames lists the scenarios in the order they run.
func ScenarioNames() []string {
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return scenarios[a].order - scenarios[b].order })
	return names
}
