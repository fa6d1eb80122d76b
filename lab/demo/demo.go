package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wingman-mesh/wingman/lab/meshlab"
)

// Options configure one run of the demo.
type Options struct {
	// Agent is the pilot-agent binary; "" builds ./cmd/pilot-agent.
	Agent string
	// Envoy is the Envoy binary; "" runs `envoy` from PATH when there is one, else the
	// stand-in (./lab/envoystub, built here).
	Envoy string
	// StandIn forces the Envoy stand-in even when envoy is on PATH.
	StandIn bool
	// CertTTL is the workload certificate's lifetime (default 10s), so that rotation shows.
	CertTTL time.Duration
	// Timeout bounds the whole run (default 2m).
	Timeout time.Duration
	// Keep leaves the temporary root directory in place (it is always kept after a failure).
	Keep bool
	// TempDir is where the root directory is made (default os.TempDir()). Keep it short: the
	// agent's Unix sockets live under the root, and socket paths are limited to 107 bytes.
	TempDir string
	// Out receives the account (nil → discard).
	Out io.Writer
}

// Outcome is the result of one step.
type Outcome struct {
	Step   string
	Status string // "ok", "skip" or "FAIL"
	Detail string
}

// StepError says which step failed.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return "step " + e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// errSkip marks a step that could not run here; the demo goes on and still exits 0.
var errSkip = errors.New("skipped")

const (
	namespace      = "demo"
	serviceAccount = "demo-sa"
	trustDomain    = "cluster.local"
	stepWidth      = 16
)

// demo is one run. Fields are set in order by Run and read by later steps (one goroutine),
// except loads, which meshlab's watcher sends on.
type demo struct {
	o          Options
	out        io.Writer
	root       string // the agent's working directory
	bin        string // where the demo builds programs
	repo       string
	agentBin   string
	envoyBin   string
	standIn    bool
	ports      struct{ status, admin, dns, envoyStatus, envoyProm int }
	mesh       mesh
	spiffeID   string
	certsDir   string // OUTPUT_CERTS
	events     string // the stand-in's event file
	lab        *meshlab.Server
	labAddr    string
	loads      chan meshlab.LoadResult
	agent      *proc
	agentStart time.Time
	ready      *readyWatch
	built      []string // binaries the demo built (unique paths: safe to look for left-behind processes)
	firstCrt   certInfo
	outcomes   []Outcome
}

// Run runs every step and returns their outcomes; the error is a *StepError naming the first
// step that failed. Everything Run starts is stopped before it returns.
func Run(ctx context.Context, o Options) ([]Outcome, error) {
	if o.CertTTL <= 0 {
		o.CertTTL = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	parent := ctx
	d := &demo{o: o, out: o.Out, loads: make(chan meshlab.LoadResult, 32)}
	var err error
	if d.root, err = os.MkdirTemp(o.TempDir, "wingman-demo-"); err != nil {
		return nil, &StepError{"setup", err}
	}
	d.bin = filepath.Join(d.root, "bin")
	failed := true
	defer func() {
		if failed || o.Keep {
			fmt.Fprintf(d.out, "\nfiles kept in %s (agent.log, meshlab.log, envoy-events.jsonl)\n", d.root)
			return
		}
		os.RemoveAll(d.root)
	}()

	fmt.Fprintf(d.out, "wingman demo: a local mesh (meshlab) and pilot-agent proxy sidecar in %s\n\n", d.root)
	// The build has its own bound (a cold build cache is slow); Timeout is for the demo proper.
	buildCtx, cancelBuild := context.WithTimeout(parent, 10*time.Minute)
	detail, err := d.build(buildCtx)
	cancelBuild()
	if err != nil {
		d.record("build", "FAIL", err.Error())
		fmt.Fprintf(d.out, "\nFAILED: step build: %v\n", err)
		return d.outcomes, &StepError{"build", err}
	}
	d.record("build", "ok", detail)

	ctx, cancel := context.WithTimeout(parent, o.Timeout)
	defer cancel()
	labCtx, stopLab := context.WithCancel(ctx)
	var labWG sync.WaitGroup
	defer func() { // after the agent's stop below (defers run last first)
		stopLab()
		labWG.Wait()
	}()
	// The agent is stopped by the shutdown step; this is for a run cut short.
	defer func() {
		cancel() // ends the readiness watch, if the run stopped before it finished
		if d.ready != nil {
			<-d.ready.done
		}
		if d.agent != nil && !d.agent.exited() {
			d.agent.stop(5 * time.Second)
		}
		if left := leftovers(d.built...); len(left) > 0 {
			fmt.Fprintf(d.out, "killed processes left behind: %s\n", strings.Join(left, ", "))
		}
	}()

	steps := []struct {
		name string
		run  func(context.Context) (string, error)
	}{
		{"control plane", func(context.Context) (string, error) { return d.startLab(labCtx, &labWG) }},
		{"agent", d.startAgent},
		{"certificate", d.certificate},
		{"envoy config", d.envoyConfig},
		{"dns", d.dns},
		{"readiness", d.readiness},
		{"proxyless grpc", d.proxyless},
		{"bad resource", d.badResource},
		{"wasm", d.wasm}, // wasm.go
		{"rotation", d.rotation},
		{"shutdown", d.shutdown},
	}
	var first error
	for _, s := range steps {
		if first != nil {
			if s.name != "shutdown" {
				continue
			}
		}
		detail, err := s.run(ctx)
		switch {
		case errors.Is(err, errSkip):
			d.record(s.name, "skip", detail)
		case err != nil:
			d.record(s.name, "FAIL", err.Error())
			if first == nil {
				first = &StepError{s.name, err}
				d.tail("agent.log", 25)
			}
		default:
			d.record(s.name, "ok", detail)
		}
	}
	if first != nil {
		fmt.Fprintf(d.out, "\nFAILED: %v\n", first)
		return d.outcomes, first
	}
	failed = false
	fmt.Fprintf(d.out, "\nevery step worked.\n")
	return d.outcomes, nil
}

func (d *demo) record(step, status, detail string) {
	d.outcomes = append(d.outcomes, Outcome{step, status, detail})
	mark := map[string]string{"ok": "[ ok ]", "skip": "[skip]", "FAIL": "[FAIL]"}[status]
	lines := strings.Split(strings.TrimRight(detail, "\n"), "\n")
	fmt.Fprintf(d.out, "%s %-*s %s\n", mark, stepWidth, step, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(d.out, "%s %s\n", strings.Repeat(" ", 7+stepWidth), l)
	}
}

// tail prints the last n lines of a file in the root, to explain a failure.
func (d *demo) tail(name string, n int) {
	b, err := os.ReadFile(filepath.Join(d.root, name))
	if err != nil || len(b) == 0 {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	fmt.Fprintf(d.out, "\n--- last lines of %s ---\n%s\n---\n", name, strings.Join(lines, "\n"))
}

// build builds the agent and, without a real Envoy, the Envoy stand-in.
func (d *demo) build(ctx context.Context) (string, error) {
	var err error
	var built []string
	if d.o.Agent == "" || (!d.o.StandIn && d.o.Envoy == "") || d.o.StandIn {
		if d.repo, err = moduleRoot(); err != nil {
			return "", err
		}
	}
	if d.o.Agent != "" {
		// The agent runs with the root as its working directory: a relative -agent (make demo
		// passes out/pilot-agent) is resolved here.
		if d.agentBin, err = filepath.Abs(d.o.Agent); err != nil {
			return "", fmt.Errorf("-agent %s: %w", d.o.Agent, err)
		}
	}
	if d.agentBin == "" {
		d.agentBin = filepath.Join(d.bin, "pilot-agent")
		fmt.Fprintln(d.out, "building ./cmd/pilot-agent ...")
		if err := goBuild(ctx, d.repo, "./cmd/pilot-agent", d.agentBin); err != nil {
			return "", err
		}
		built = append(built, "pilot-agent")
		d.built = append(d.built, d.agentBin)
	} else if d.agentBin, err = filepath.Abs(d.agentBin); err != nil {
		return "", err
	}
	d.envoyBin = d.o.Envoy
	if d.envoyBin == "" && !d.o.StandIn {
		d.envoyBin, _ = exec.LookPath("envoy")
	}
	envoy := "envoy " + d.envoyBin
	if d.envoyBin == "" {
		d.standIn = true
		d.envoyBin = filepath.Join(d.bin, "envoy-standin")
		fmt.Fprintln(d.out, "building the Envoy stand-in ./lab/envoystub ...")
		if err := goBuild(ctx, d.repo, "./lab/envoystub", d.envoyBin); err != nil {
			return "", err
		}
		d.built = append(d.built, d.envoyBin)
		built = append(built, "the Envoy stand-in (lab/envoystub: real ADS+SDS client, admin /stats and /ready)")
		envoy = "no envoy on PATH: Envoy stand-in"
	}
	if len(built) == 0 {
		return "using " + d.agentBin + "; " + envoy, nil
	}
	return "built " + strings.Join(built, " and ") + "; " + envoy, nil
}

// startLab renders the mesh's resources and starts meshlab in this process.
func (d *demo) startLab(ctx context.Context, wg *sync.WaitGroup) (string, error) {
	ports, err := freePorts(8)
	if err != nil {
		return "", err
	}
	d.ports.status, d.ports.admin, d.ports.dns, d.ports.envoyStatus, d.ports.envoyProm = ports[0], ports[1], ports[2], ports[3], ports[4]
	d.spiffeID = "spiffe://" + trustDomain + "/ns/" + namespace + "/sa/" + serviceAccount
	d.mesh = newMesh(namespace, d.spiffeID, ports[5:8])
	resDir := filepath.Join(d.root, "meshlab", "resources")
	if err := writeResources(resDir, d.mesh); err != nil {
		return "", err
	}
	logf, err := os.Create(filepath.Join(d.root, "meshlab.log"))
	if err != nil {
		return "", err
	}
	wg.Go(func() { <-ctx.Done(); logf.Close() })
	d.lab, err = meshlab.New(meshlab.Config{
		ResourcesDir: resDir, OutputDir: d.root, CertTTL: d.o.CertTTL, Debounce: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logf, nil)),
		OnLoad: func(r meshlab.LoadResult) {
			select {
			case d.loads <- r:
			default:
			}
		},
	})
	if err != nil {
		return "", err
	}
	<-d.loads // the first load, reported below
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	d.labAddr = lis.Addr().String()
	wg.Go(func() {
		if err := d.lab.Serve(ctx, lis); err != nil {
			fmt.Fprintf(d.out, "meshlab: %v\n", err)
		}
	})
	set, _ := meshlab.LoadDir(resDir)
	return fmt.Sprintf("meshlab on %s (xDS and CA, TLS, bearer token): %s\n"+
		"wrote ./%s and ./%s for the agent", d.labAddr, set.Counts(), meshlab.RootCertPath, meshlab.TokenPath), nil
}

// agentEnv is the environment Istio's injector would give the istio-proxy container.
func (d *demo) agentEnv() ([]string, error) {
	pc, err := json.Marshal(map[string]any{
		"discoveryAddress":         d.labAddr,
		"binaryPath":               d.envoyBin,
		"proxyAdminPort":           d.ports.admin,
		"statusPort":               d.ports.status,
		"drainDuration":            "2s",
		"terminationDrainDuration": "1s",
	})
	if err != nil {
		return nil, err
	}
	d.certsDir = filepath.Join(d.root, "etc", "istio-output-certs")
	d.events = filepath.Join(d.root, "envoy-events.jsonl")
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + d.root,
		"POD_NAME=alpha-7d9f8c6b5-x2x9z",
		"POD_NAMESPACE=" + namespace,
		"INSTANCE_IP=127.0.0.1",
		"HOST_IP=127.0.0.1",
		"SERVICE_ACCOUNT=" + serviceAccount,
		"TRUST_DOMAIN=" + trustDomain,
		"ISTIO_META_CLUSTER_ID=Kubernetes",
		"ISTIO_META_WORKLOAD_NAME=alpha",
		"ISTIO_META_DNS_CAPTURE=true",
		"DNS_PROXY_ADDR=127.0.0.1:" + strconv.Itoa(d.ports.dns),
		"PROXY_CONFIG=" + string(pc),
		"CA_ADDR=" + d.labAddr,
		"ISTIOD_SAN=" + meshlab.ServerName,
		"PILOT_CERT_PROVIDER=istiod",
		"OUTPUT_CERTS=" + d.certsDir,
		"ECC_SIGNATURE_ALGORITHM=ECDSA",
		"SECRET_TTL=" + d.o.CertTTL.String(),
		"GRPC_XDS_BOOTSTRAP=" + filepath.Join(d.root, "etc", "istio", "proxy", "grpc-bootstrap.json"),
		"ENVOY_STATUS_PORT=" + strconv.Itoa(d.ports.envoyStatus),
		"ENVOY_PROMETHEUS_PORT=" + strconv.Itoa(d.ports.envoyProm),
		"CLOUD_PLATFORM=none",
	}
	if d.standIn {
		env = append(env, "PERF_EVENTS="+d.events)
	}
	return env, nil
}

// startAgent starts `pilot-agent proxy sidecar` with cwd = the root.
func (d *demo) startAgent(ctx context.Context) (string, error) {
	env, err := d.agentEnv()
	if err != nil {
		return "", err
	}
	logf, err := os.Create(filepath.Join(d.root, "agent.log"))
	if err != nil {
		return "", err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(d.agentBin, "proxy", "sidecar", "--domain", namespace+".svc.cluster.local",
		"--proxyLogLevel=warning", "--log_output_level=default:info")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = d.root, env, logf, logf
	d.agentStart = time.Now()
	if d.agent, err = startProc("pilot-agent", cmd); err != nil {
		return "", err
	}
	d.ready = d.watchReady(ctx)
	return fmt.Sprintf("pilot-agent proxy sidecar (pid %d), cwd %s\n"+
		"status :%d, DNS :%d, Envoy admin :%d, discovery and CA at %s as %s",
		d.agent.cmd.Process.Pid, d.root, d.ports.status, d.ports.dns, d.ports.admin, d.labAddr, meshlab.ServerName), nil
}
